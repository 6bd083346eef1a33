package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicemq/sluice/server/config"
)

// The shell completion command: a script for a known shell, a bad command
// line (exit 2, nothing on stdout to source) for a missing or unknown one;
// the help command likewise for a topic that is no command.
func TestCompletionAndHelp(t *testing.T) {
	code, stdout, _ := sluice(t, "completion", "bash")
	if code != 0 || !strings.Contains(stdout, "bash completion") {
		t.Errorf("completion bash: exit %d, stdout %.80q", code, stdout)
	}
	for _, args := range [][]string{{"help"}, {"help", "reassign", "plan"}, {"help", "dump-log"}} {
		if code, stdout, _ := sluice(t, args...); code != 0 || !strings.Contains(stdout, "Usage:") {
			t.Errorf("sluice %s: exit %d, stdout %.80q", strings.Join(args, " "), code, stdout)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"completion"}, "a shell is required: bash, zsh, fish or powershell"},
		{[]string{"completion", "bsh"}, `unknown command "bsh"`},
		{[]string{"help", "nosuch"}, `no help topic "nosuch"`},
		{[]string{"help", "reassign", "nosuch"}, `no help topic "reassign nosuch"`},
	} {
		code, stdout, stderr := sluice(t, tc.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("sluice %s: exit %d, stdout %.80q, stderr %q; want exit 2, no stdout, %q",
				strings.Join(tc.args, " "), code, stdout, stderr, tc.want)
		}
	}
}

// sluice serve -h describes its argument and flags and lists every key
// with its default and synonyms; more than one FILE is a bad command line.
func TestServeHelp(t *testing.T) {
	code, stdout, _ := sluice(t, "serve", "-h")
	if code != 0 {
		t.Fatalf("serve -h: exit %d", code)
	}
	d := config.Default()
	want := []string{
		"usage:\n  sluice serve [FILE | --config FILE] [--set key=value]...\n",
		"arguments:\n  FILE ", "kafka-server-start.sh",
		"--config FILE", "--set key=value", "the last --set of a key wins",
		"127.0.0.1:9092", "./data", "http://127.0.0.1:9644/ui/",
		"log.retention.ms=604800000   (also log.retention.minutes, log.retention.hours)\n",
	}
	for _, k := range config.Keys() {
		v, _ := d.String(k)
		want = append(want, "\n  "+k+"="+v)
	}
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("serve -h does not say %q:\n%s", w, stdout)
		}
	}
	code, stdout, stderr := sluice(t, "serve", "a.properties", "b.properties")
	if code != 2 || stdout != "" || !strings.Contains(stderr, "one config FILE at most") {
		t.Errorf("serve with two FILEs: exit %d, stdout %q, stderr %q; want exit 2 and why", code, stdout, stderr)
	}
}

// asSluice, when set in the environment, makes the test binary run
// sluice with its arguments after "--" (a child process of a test).
const asSluice = "SLUICE_TEST_RUN_AS_SLUICE"

func TestMain(m *testing.M) {
	if os.Getenv(asSluice) != "" {
		for i, a := range os.Args {
			if a == "--" {
				os.Exit(run(os.Args[i+1:], os.Stdout, os.Stderr))
			}
		}
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func init() {
	// test-wait stands for a command that takes no context (dump-log): it
	// says it is running, then blocks.
	register(func() *cobra.Command {
		return &cobra.Command{
			Use: "test-wait", Hidden: true, Annotations: map[string]string{noSignalContext: "yes"},
			RunE: func(cmd *cobra.Command, _ []string) error {
				fmt.Fprintln(cmd.OutOrStdout(), "running")
				time.Sleep(time.Hour)
				return nil
			},
		}
	})
}

// SIGINT ends a command that takes no context at once (run does not
// catch it for such a command, which would never stop).
func TestSIGINTEndsCommandWithoutContext(t *testing.T) {
	for _, c := range []*cobra.Command{newDumpLogCmd()} {
		if c.Annotations[noSignalContext] == "" {
			t.Errorf("%s takes no context but lacks the %s annotation", c.Name(), noSignalContext)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "test-wait")
	cmd.Env = append(os.Environ(), asSluice+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "running\n" {
		t.Fatalf("the child printed %q, %v", line, err)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Errorf("the child ended with %v, want killed by SIGINT", cmd.ProcessState)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the child still runs 10 s after SIGINT")
	}
}

// Every command that only groups others, run alone, is a bad command line
// (exit 2, nothing on stdout, what is required and where help is), as the
// root itself; its -h prints its help and exits 0. Every command's -h
// gives each flag one default at most (pflag adds "(default X)" for a
// non-zero default, beside any the usage states).
func TestCommandTreeHelpAndParents(t *testing.T) {
	var walk func(c *cobra.Command)
	var parents, all [][]string
	walk = func(c *cobra.Command) {
		path := strings.Fields(c.CommandPath())[1:]
		switch c.Name() {
		case "help", "completion", "version":
			return // TestCompletionAndHelp
		}
		all = append(all, path)
		if c.HasSubCommands() {
			parents = append(parents, path)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(io.Discard, io.Discard))
	if len(parents) < 10 {
		t.Fatalf("found %d parent commands: %v", len(parents), parents)
	}
	for _, p := range parents {
		code, stdout, stderr := sluice(t, p...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "a command is required") || !strings.Contains(stderr, "-h for help") {
			t.Errorf("sluice %s: exit %d, stdout %.80q, stderr %q; want exit 2, no stdout, \"a command is required\" and where help is",
				strings.Join(p, " "), code, stdout, stderr)
		}
	}
	for _, p := range all {
		code, stdout, _ := sluice(t, append(slices.Clone(p), "-h")...)
		if code != 0 || stdout == "" {
			t.Errorf("sluice %s -h: exit %d, stdout %.80q; want its help, exit 0", strings.Join(p, " "), code, stdout)
		}
		for _, line := range strings.Split(stdout, "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("sluice %s -h: a flag with two defaults: %s", strings.Join(p, " "), strings.TrimSpace(line))
			}
		}
	}
}
