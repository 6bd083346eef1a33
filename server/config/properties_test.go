package config

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

// Expected results follow java.util.Properties.load.
func TestParseProperties(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string
	}{
		{"equals", "a=b", map[string]string{"a": "b"}},
		{"spaces around equals", "a = b", map[string]string{"a": "b"}},
		{"colon", "a:b\nc : d", map[string]string{"a": "b", "c": "d"}},
		{"whitespace separator", "a b\nc\td\ne \f f", map[string]string{"a": "b", "c": "d", "e": "f"}},
		{"whitespace then one separator", "a  :  b\nc \t= d", map[string]string{"a": "b", "c": "d"}},
		{"second separator is value", "a==b\nc: :d", map[string]string{"a": "=b", "c": ":d"}},
		{"separator in value", "a b=c\nd=e:f=g", map[string]string{"a": "b=c", "d": "e:f=g"}},
		{"leading whitespace skipped, trailing kept", "  \t a=b  ", map[string]string{"a": "b  "}},
		{"key only", "a\nb=\nc :", map[string]string{"a": "", "b": "", "c": ""}},
		{"empty key", "=v", map[string]string{"": "v"}},
		{"comments and blank lines", "# c\n! c\n   # indented\n\n \t \nk=v\n#k=w", map[string]string{"k": "v"}},
		{"hash inside value", "k=a#b", map[string]string{"k": "a#b"}},
		{"escaped separators in key", `a\=b=c` + "\n" + `d\:e:f` + "\n" + `g\ h i`, map[string]string{"a=b": "c", "d:e": "f", "g h": "i"}},
		{"continuation", "k=a,\\\n    b,\\\n\tc", map[string]string{"k": "a,b,c"}},
		{"continuation in key", "ke\\\n  y=v", map[string]string{"key": "v"}},
		{"even backslashes do not continue", "a=b\\\\\nc=d", map[string]string{"a": `b\`, "c": "d"}},
		{"odd backslashes continue", "a=b\\\\\\\n c", map[string]string{"a": `b\c`}},
		{"comment is not continued", "# c \\\nk=v", map[string]string{"k": "v"}},
		{"continued line is not a comment", "k=v\\\n# w", map[string]string{"k": "v# w"}},
		{"empty continuation ends the line", "a=b\\\n\nc=d", map[string]string{"a": "b", "c": "d"}},
		{"backslash at EOF dropped", "a=b\\", map[string]string{"a": "b"}},
		{"CRLF and CR", "a=1\r\nb=2\rc=3\\\r\n  4", map[string]string{"a": "1", "b": "2", "c": "34"}},
		{"escapes", `k=\t\n\r\f\q\\\#\u0041\u00e9`, map[string]string{"k": "\t\n\r\fq\\#Aé"}},
		{"surrogate pair", `k=\uD83D\uDE00`, map[string]string{"k": "😀"}},
		{"lone surrogate", `k=\uD83Dx`, map[string]string{"k": "\uFFFDx"}},
		{"utf-8 kept", "k=héllo\\é", map[string]string{"k": "hélloé"}},
		{"last duplicate wins", "k=1\nk=2", map[string]string{"k": "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProperties(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParsePropertiesMalformedUnicode(t *testing.T) {
	in := "a=1\nb=\\u00\nc=\\\n  x\\uZZZZ\nd=4"
	got, err := ParseProperties(strings.NewReader(in))
	if !errors.Is(err, ErrSyntax) {
		t.Fatalf("err = %v, want ErrSyntax", err)
	}
	var lines []int
	for _, e := range flatten(err) {
		var ce *Error
		if errors.As(e, &ce) {
			lines = append(lines, ce.Line)
		}
	}
	if len(lines) != 2 || lines[0] != 2 || lines[1] != 3 {
		t.Errorf("error lines = %v, want [2 3]; err: %v", lines, err)
	}
	if want := map[string]string{"a": "1", "d": "4"}; !maps.Equal(got, want) {
		t.Errorf("good lines = %q, want %q", got, want)
	}
	if !strings.Contains(err.Error(), `line 2: malformed \uxxxx escape`) {
		t.Errorf("message: %v", err)
	}
}
