package main

// sluice user scram: add, delete and describe SCRAM credentials
// (AlterUserScramCredentials, DescribeUserScramCredentials; KIP-554), as
// kafka-configs.sh --entity-type users does with
// --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]',
// --alter --delete-config SCRAM-SHA-256 and --describe. The password is
// salted here (a random 24-byte salt, PBKDF2 with the mechanism's hash);
// only the salt and salted password are sent.

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

func init() { register(newUserCmd) }

func newUserCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "user COMMAND",
		Short: "Manage users' SCRAM credentials (as kafka-configs.sh --entity-type users)",
		Long: `Adds, deletes and describes users' SCRAM credentials, as Kafka's
kafka-configs.sh --entity-type users does, with Kafka's APIs.

` + clusterFlagsHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("a command is required: scram")
		},
	}
	scramCmd := &cobra.Command{
		Use:   "scram COMMAND",
		Short: "Add, delete or describe SCRAM credentials",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("a command is required: add, delete or describe")
		},
	}
	scramCmd.AddCommand(newScramAddCmd(), newScramDeleteCmd(), newScramDescribeCmd())
	c.AddCommand(scramCmd)
	return c
}

// parseScramMechanism reads SCRAM-SHA-256 or SCRAM-SHA-512.
func parseScramMechanism(s string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, usageErrorf("unknown SCRAM mechanism %q (SCRAM-SHA-256 or SCRAM-SHA-512)", s)
}

// parseAddConfig reads kafka-configs.sh's
// 'SCRAM-SHA-256=[iterations=8192,password=secret],SCRAM-SHA-512=[password=secret]'.
// Iterations default to 4096, Kafka's.
func parseAddConfig(s string) ([]kadm.UpsertSCRAM, error) {
	var out []kadm.UpsertSCRAM
	for rest := strings.TrimSpace(s); rest != ""; {
		name, after, ok := strings.Cut(rest, "=")
		if !ok {
			return nil, usageErrorf("--add-config: %q is not MECHANISM=[...]", rest)
		}
		mech, err := parseScramMechanism(name)
		if err != nil {
			return nil, err
		}
		u := kadm.UpsertSCRAM{Mechanism: mech, Iterations: 4096}
		var body string
		if strings.HasPrefix(after, "[") {
			end := strings.Index(after, "]")
			if end < 0 {
				return nil, usageErrorf("--add-config: missing ']'")
			}
			body, rest = after[1:end], strings.TrimPrefix(strings.TrimSpace(after[end+1:]), ",")
		} else {
			body, rest, _ = strings.Cut(after, ",")
			body = "password=" + body
		}
		for _, kv := range strings.Split(body, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch strings.TrimSpace(k) {
			case "iterations":
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
				if err != nil {
					return nil, usageErrorf("--add-config: iterations %q is not a number", v)
				}
				u.Iterations = int32(n)
			case "password":
				u.Password = v
			default:
				return nil, usageErrorf("--add-config: unknown key %q (iterations, password)", k)
			}
		}
		if u.Password == "" {
			return nil, usageErrorf("--add-config: %s needs a password", mech)
		}
		out = append(out, u)
		rest = strings.TrimSpace(rest)
	}
	return out, nil
}

func newScramAddCmd() *cobra.Command {
	c := command("add --user NAME (--add-config 'SCRAM-SHA-256=[iterations=8192,password=...]' | --mechanism M --password P [--iterations N])",
		`Adds or replaces a user's SCRAM credential (AlterUserScramCredentials). Iterations must be in [4096, 16384]; the default is 4096.`)
	fs := c.Flags()
	user := fs.String("user", "", "the user `name`")
	addConfig := fs.String("add-config", "", "kafka-configs.sh's `credentials`: 'SCRAM-SHA-256=[iterations=8192,password=...]'")
	mech := fs.String("mechanism", "SCRAM-SHA-256", "SCRAM-SHA-256 or SCRAM-SHA-512")
	password := fs.String("password", "", "the `password`")
	iterations := fs.Int32("iterations", 4096, "PBKDF2 iterations")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if *user == "" {
			return usageErrorf("--user is required")
		}
		var ups []kadm.UpsertSCRAM
		switch {
		case *addConfig != "":
			var err error
			if ups, err = parseAddConfig(*addConfig); err != nil {
				return err
			}
		case *password != "":
			m, err := parseScramMechanism(*mech)
			if err != nil {
				return err
			}
			ups = []kadm.UpsertSCRAM{{Mechanism: m, Iterations: *iterations, Password: *password}}
		default:
			return usageErrorf("--add-config or --password is required")
		}
		for i := range ups {
			ups[i].User = *user
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			// Kafka refuses a user twice in one request: one per mechanism.
			for _, u := range ups {
				if err := alterScram(ctx, a, nil, []kadm.UpsertSCRAM{u}, cmd.OutOrStdout(), fmt.Sprintf("%s %s", u.User, u.Mechanism)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return c
}

func newScramDeleteCmd() *cobra.Command {
	c := command("delete --user NAME --mechanism M", `Deletes a user's SCRAM credential for one mechanism (AlterUserScramCredentials).`)
	fs := c.Flags()
	user := fs.String("user", "", "the user `name`")
	mech := fs.String("mechanism", "", "SCRAM-SHA-256 or SCRAM-SHA-512")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if *user == "" || *mech == "" {
			return usageErrorf("--user and --mechanism are required")
		}
		m, err := parseScramMechanism(*mech)
		if err != nil {
			return err
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			return alterScram(ctx, a, []kadm.DeleteSCRAM{{User: *user, Mechanism: m}}, nil, cmd.OutOrStdout(), fmt.Sprintf("%s %s", *user, m))
		})
	}
	return c
}

func alterScram(ctx context.Context, a *admin, del []kadm.DeleteSCRAM, up []kadm.UpsertSCRAM, w io.Writer, what string) error {
	ctx, cancel := a.ctx(ctx)
	defer cancel()
	rs, err := a.adm.AlterUserSCRAMs(ctx, del, up)
	if err != nil {
		return fmt.Errorf("AlterUserScramCredentials: %w", unwrapKadm(err))
	}
	for _, r := range rs {
		if err := brokerErr(r.Err, &r.ErrMessage); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if len(del) > 0 {
		fmt.Fprintf(w, "Deleted %s.\n", what)
	} else {
		fmt.Fprintf(w, "Set %s (%d iterations).\n", what, up[0].Iterations)
	}
	return nil
}

func newScramDescribeCmd() *cobra.Command {
	c := command("describe [--user NAME]...", `Describes users' SCRAM credentials: mechanisms and iterations (DescribeUserScramCredentials). No --user describes every user.`)
	fs := c.Flags()
	users := fs.StringArray("user", nil, "a user `name` (repeatable)")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			rs, err := a.adm.DescribeUserSCRAMs(ctx, *users...)
			if err != nil {
				return fmt.Errorf("DescribeUserScramCredentials: %w", unwrapKadm(err))
			}
			names := make([]string, 0, len(rs))
			for n := range rs {
				names = append(names, n)
			}
			sort.Strings(names)
			w := cmd.OutOrStdout()
			var failed error
			for _, n := range names {
				r := rs[n]
				if err := brokerErr(r.Err, &r.ErrMessage); err != nil {
					fmt.Fprintf(w, "User %s: %v\n", n, err)
					failed = fmt.Errorf("user %s: %w", n, err)
					continue
				}
				var parts []string
				for _, ci := range r.CredInfos {
					parts = append(parts, fmt.Sprintf("%s=iterations=%d", ci.Mechanism, ci.Iterations))
				}
				fmt.Fprintf(w, "SCRAM credential configs for user-principal '%s' are %s\n", n, strings.Join(parts, ", "))
			}
			return failed
		})
	}
	return c
}
