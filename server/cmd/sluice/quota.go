package main

// sluice quota: describe and alter client quotas (DescribeClientQuotas,
// AlterClientQuotas; KIP-546), as kafka-configs.sh does with
// --entity-type users|clients|ips, --entity-name NAME or --entity-default
// (one per entity type, in order), --add-config k=v,... and
// --delete-config k,...; users and clients combine, ips stand alone.

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(newQuotaCmd) }

func newQuotaCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "quota COMMAND",
		Short: "Describe or alter client quotas (as kafka-configs.sh --entity-type users|clients|ips)",
		Long: `Describes and alters client quotas (producer_byte_rate, consumer_byte_rate,
request_percentage, controller_mutation_rate for users and clients;
connection_creation_rate for ips), as Kafka's kafka-configs.sh does, with
Kafka's APIs.

` + clusterFlagsHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("a command is required: describe or alter")
		},
	}
	c.AddCommand(newQuotaDescribeCmd(), newQuotaAlterCmd())
	return c
}

// quotaEntityTypes maps kafka-configs.sh's entity types to the protocol's.
var quotaEntityTypes = map[string]string{"users": "user", "clients": "client-id", "ips": "ip"}

// entityFlags are the --entity-type, --entity-name and --entity-default
// flags: names pair with types in order; the types left over are their
// default entity when --entity-default is given.
type entityFlags struct {
	types, names *[]string
	def          *bool
}

func addEntityFlags(c *cobra.Command) entityFlags {
	fs := c.Flags()
	return entityFlags{
		types: fs.StringArray("entity-type", nil, "users, clients or ips (repeatable: users with clients)"),
		names: fs.StringArray("entity-name", nil, "the entity `name` of the --entity-type in the same place"),
		def:   fs.Bool("entity-default", false, "the default entity of the --entity-type given no --entity-name"),
	}
}

// entity returns the entity the flags name; a nil name is the default
// entity. Without needAll (describe) a type with neither a name nor
// --entity-default gets an empty name: any entity of the type.
func (f entityFlags) entity(needAll bool) (kadm.ClientQuotaEntity, error) {
	if len(*f.names) > len(*f.types) {
		return nil, usageErrorf("more --entity-name than --entity-type")
	}
	var e kadm.ClientQuotaEntity
	for i, t := range *f.types {
		pt, ok := quotaEntityTypes[t]
		if !ok {
			return nil, usageErrorf("unknown --entity-type %q (users, clients or ips)", t)
		}
		c := kadm.ClientQuotaEntityComponent{Type: pt}
		switch {
		case i < len(*f.names):
			c.Name = kmsg.StringPtr((*f.names)[i])
		case *f.def:
		case needAll:
			return nil, usageErrorf("--entity-type %s needs --entity-name or --entity-default", t)
		default:
			c.Name = kmsg.StringPtr("") // any name (describe)
		}
		e = append(e, c)
	}
	if needAll && len(e) == 0 {
		return nil, usageErrorf("--entity-type is required")
	}
	return e, nil
}

// describeEntity names an entity as kafka-configs.sh does.
func describeEntity(e kadm.ClientQuotaEntity) string {
	names := map[string]string{"user": "user-principal", "client-id": "client-id", "ip": "ip"}
	var parts []string
	for _, c := range e {
		if c.Name == nil {
			parts = append(parts, "the default "+names[c.Type])
		} else {
			parts = append(parts, fmt.Sprintf("%s '%s'", names[c.Type], *c.Name))
		}
	}
	return strings.Join(parts, ", ")
}

func newQuotaDescribeCmd() *cobra.Command {
	c := command("describe [--entity-type T [--entity-name N | --entity-default]]...",
		`Describes client quotas (DescribeClientQuotas). No --entity-type describes every entity; a type without a name or --entity-default matches any entity of that type.`)
	ef := addEntityFlags(c)
	cf := addClusterFlags(c.Flags())
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		e, err := ef.entity(false)
		if err != nil {
			return err
		}
		var cs []kadm.DescribeClientQuotaComponent
		for _, ec := range e {
			dc := kadm.DescribeClientQuotaComponent{Type: ec.Type, MatchType: kmsg.QuotasMatchTypeDefault}
			switch {
			case ec.Name != nil && *ec.Name == "":
				dc.MatchType = kmsg.QuotasMatchTypeAny
			case ec.Name != nil:
				dc.MatchType, dc.MatchName = kmsg.QuotasMatchTypeExact, ec.Name
			}
			cs = append(cs, dc)
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			qs, err := a.adm.DescribeClientQuotas(ctx, false, cs)
			if err != nil {
				return fmt.Errorf("DescribeClientQuotas: %w", unwrapKadm(err))
			}
			printQuotas(cmd.OutOrStdout(), qs)
			return nil
		})
	}
	return c
}

// printQuotas writes one line per entity, sorted, its values by key.
func printQuotas(w io.Writer, qs kadm.DescribedClientQuotas) {
	lines := make([]string, 0, len(qs))
	for _, q := range qs {
		vals := make([]string, 0, len(q.Values))
		for _, v := range q.Values {
			vals = append(vals, v.Key+"="+strconv.FormatFloat(v.Value, 'f', -1, 64))
		}
		sort.Strings(vals)
		lines = append(lines, fmt.Sprintf("Quota configs for %s are %s", describeEntity(q.Entity), strings.Join(vals, ", ")))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func newQuotaAlterCmd() *cobra.Command {
	c := command("alter --entity-type T (--entity-name N | --entity-default)... [--add-config k=v,...] [--delete-config k,...] [--validate-only]",
		`Sets and removes one entity's client quotas (AlterClientQuotas).`)
	ef := addEntityFlags(c)
	fs := c.Flags()
	add := fs.String("add-config", "", "quotas to set: `k=v,...` (producer_byte_rate=1048576,request_percentage=50)")
	del := fs.String("delete-config", "", "quotas to remove: `k,...`")
	validate := fs.Bool("validate-only", false, "check the change without applying it")
	cf := addClusterFlags(fs)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		e, err := ef.entity(true)
		if err != nil {
			return err
		}
		var ops []kadm.AlterClientQuotaOp
		for _, kv := range splitList(*add) {
			k, v, ok := strings.Cut(kv, "=")
			f, perr := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if !ok || perr != nil {
				return usageErrorf("--add-config: %q is not key=number", kv)
			}
			ops = append(ops, kadm.AlterClientQuotaOp{Key: strings.TrimSpace(k), Value: f})
		}
		for _, k := range splitList(*del) {
			ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
		}
		if len(ops) == 0 {
			return usageErrorf("--add-config or --delete-config is required")
		}
		return runAdmin(cmd, cf, func(ctx context.Context, a *admin) error {
			ctx, cancel := a.ctx(ctx)
			defer cancel()
			alter := a.adm.AlterClientQuotas
			if *validate {
				alter = a.adm.ValidateAlterClientQuotas
			}
			rs, err := alter(ctx, []kadm.AlterClientQuotaEntry{{Entity: e, Ops: ops}})
			if err != nil {
				return fmt.Errorf("AlterClientQuotas: %w", unwrapKadm(err))
			}
			for _, r := range rs {
				if err := brokerErr(r.Err, &r.ErrMessage); err != nil {
					return fmt.Errorf("%s: %w", describeEntity(e), err)
				}
			}
			verb := "Completed updating"
			if *validate {
				verb = "Validated"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s quotas for %s.\n", verb, describeEntity(e))
			return nil
		})
	}
	return c
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
