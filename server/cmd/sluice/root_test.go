package main

import (
	"strings"
	"testing"
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
