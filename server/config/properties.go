package config

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseProperties reads text in java.util.Properties syntax, as Kafka reads
// server.properties, and returns its keys and values (the last of a
// repeated key wins):
//
//   - Lines end at \n, \r or \r\n. Leading spaces, tabs and form feeds are
//     skipped; blank lines are ignored; a line whose first other character
//     is # or ! is a comment (a backslash does not continue a comment).
//   - A line ending in an odd number of backslashes continues on the next
//     line, whose leading whitespace is skipped.
//   - The key runs to the first unescaped =, : or whitespace; whitespace,
//     then at most one = or :, then whitespace again separate it from the
//     value. The value runs to the end of the line: trailing whitespace is
//     kept (Config's setters trim it).
//   - In keys and values \t \n \r \f are escapes, \uXXXX is a UTF-16 code
//     unit (surrogate pairs combine), and a backslash before any other
//     character stands for that character (\=, \:, \ , \\, \#).
//
// Unlike Java, which reads ISO-8859-1, the input is taken as UTF-8.
// A malformed \uXXXX escape is an *Error wrapping ErrSyntax with its line;
// every such error is reported (joined) and the well-formed lines are still
// returned.
func ParseProperties(r io.Reader) (map[string]string, error) {
	props, _, err := parseProperties(r)
	return props, err
}

// parseProperties is ParseProperties, and also returns the line each key's
// (last) value starts on.
func parseProperties(r io.Reader) (props map[string]string, lines map[string]int, err error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("config: read: %w", err)
	}
	props, lines = map[string]string{}, map[string]int{}
	var errs []error
	lr := lineReader{data: data}
	for {
		line, n, ok := lr.next()
		if !ok {
			break
		}
		k, v := splitKeyValue(line)
		key, err1 := unescape(k)
		val, err2 := unescape(v)
		if err := errors.Join(err1, err2); err != nil {
			errs = append(errs, &Error{Line: n, Reason: err.Error(), Err: ErrSyntax})
			continue
		}
		props[key], lines[key] = val, n
	}
	return props, lines, errors.Join(errs...)
}

// lineReader yields logical lines as java.util.Properties.LineReader does:
// comments and blank lines dropped, continuations joined, escapes left in.
type lineReader struct {
	data  []byte
	pos   int
	lines int // line terminators consumed
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

// next returns the next logical line and the number of the line it starts
// on, or ok=false at the end.
func (lr *lineReader) next() (line []byte, lineNo int, ok bool) {
	var buf []byte
	skipWS := true     // skipping leading whitespace
	appended := false  // at the start of a continuation line
	backslash := false // buf ends in an odd number of backslashes
	for lr.pos < len(lr.data) {
		c := lr.data[lr.pos]
		lr.pos++
		eol := c == '\n' || c == '\r'
		if eol {
			if c == '\r' && lr.pos < len(lr.data) && lr.data[lr.pos] == '\n' {
				lr.pos++
			}
			lr.lines++
		}
		if skipWS {
			if isSpace(c) || eol && !appended {
				continue
			}
			skipWS, appended = false, false
		}
		if len(buf) == 0 && (c == '#' || c == '!') {
			for lr.pos < len(lr.data) && lr.data[lr.pos] != '\n' && lr.data[lr.pos] != '\r' {
				lr.pos++
			}
			skipWS = true
			continue
		}
		if !eol {
			if len(buf) == 0 {
				lineNo = lr.lines + 1
			}
			buf = append(buf, c)
			backslash = c == '\\' && !backslash
			continue
		}
		switch {
		case len(buf) == 0: // blank, or an empty continuation: nothing yet
			skipWS = true
		case backslash: // continuation: drop the backslash, join the next line
			buf = buf[:len(buf)-1]
			skipWS, appended, backslash = true, true, false
		default:
			return buf, lineNo, true
		}
	}
	if len(buf) == 0 {
		return nil, 0, false
	}
	if backslash { // a backslash at the very end is dropped
		buf = buf[:len(buf)-1]
	}
	return buf, lineNo, true
}

// splitKeyValue splits a logical line as java.util.Properties.load0 does.
func splitKeyValue(line []byte) (key, value []byte) {
	keyLen, valueStart := 0, len(line)
	hasSep, backslash := false, false
	for ; keyLen < len(line); keyLen++ {
		c := line[keyLen]
		if !backslash && (c == '=' || c == ':') {
			valueStart, hasSep = keyLen+1, true
			break
		}
		if !backslash && isSpace(c) {
			valueStart = keyLen + 1
			break
		}
		backslash = c == '\\' && !backslash
	}
	for ; valueStart < len(line); valueStart++ {
		c := line[valueStart]
		if isSpace(c) {
			continue
		}
		if hasSep || c != '=' && c != ':' {
			break
		}
		hasSep = true
	}
	return line[:keyLen], line[valueStart:]
}

// unescape decodes backslash escapes as java.util.Properties.loadConvert.
func unescape(s []byte) (string, error) {
	if !strings.ContainsRune(string(s), '\\') {
		return string(s), nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		i++
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i == len(s) { // cannot happen after lineReader; drop it
			break
		}
		c = s[i]
		i++
		switch c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, ok := hex4(s[i:])
			if !ok {
				return "", errors.New(`malformed \uxxxx escape`)
			}
			i += 4
			if utf16.IsSurrogate(r) && len(s) >= i+6 && s[i] == '\\' && s[i+1] == 'u' {
				if r2, ok := hex4(s[i+2:]); ok {
					if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
						r = pair
						i += 6
					}
				}
			}
			b.WriteRune(r) // a lone surrogate becomes U+FFFD
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
