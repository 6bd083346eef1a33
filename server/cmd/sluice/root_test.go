package main

import (
	"strings"
	"testing"
)

// The shell completion command: a script for a known shell, a bad command
// line (exit 2, nothing on stdout to source) for a missing or unknown one.
func TestCompletion(t *testing.T) {
	code, stdout, _ := sluice(t, "completion", "bash")
	if code != 0 || !strings.Contains(stdout, "bash completion") {
		t.Errorf("completion bash: exit %d, stdout %.80q", code, stdout)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"completion"}, "a shell is required: bash, zsh, fish or powershell"},
		{[]string{"completion", "bsh"}, `unknown command "bsh"`},
	} {
		code, stdout, stderr := sluice(t, tc.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("sluice %s: exit %d, stdout %.80q, stderr %q; want exit 2, no stdout, %q",
				strings.Join(tc.args, " "), code, stdout, stderr, tc.want)
		}
	}
}
