package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Jaas is one login module entry of a sasl.jaas.config value, Kafka's
// JAAS syntax:
//
//	<login module class> <flag> [name=value]... ;
//
// flag is required, requisite, sufficient or optional; a value is a
// double-quoted string (backslash escapes the next character) or a bare
// word. Exactly one entry, ended by ';', as Kafka requires of
// sasl.jaas.config.
type Jaas struct {
	LoginModule string
	Flag        string
	Options     map[string]string
}

// PlainUsers returns the user_<name>="<password>" options: the users a
// PLAIN listener accepts.
func (j Jaas) PlainUsers() map[string]string {
	users := map[string]string{}
	for k, v := range j.Options {
		if name, ok := strings.CutPrefix(k, "user_"); ok && name != "" {
			users[name] = v
		}
	}
	return users
}

// UnsecuredValidator holds the JAAS options of Kafka's unsecured
// OAUTHBEARER validator (OAuthBearerUnsecuredValidatorCallbackHandler),
// with Kafka's defaults for blank ones.
type UnsecuredValidator struct {
	PrincipalClaim string   // unsecuredValidatorPrincipalClaimName; default "sub"
	ScopeClaim     string   // unsecuredValidatorScopeClaimName; default "scope"
	RequiredScope  []string // unsecuredValidatorRequiredScope, space-separated; default none
	ClockSkewMs    int64    // unsecuredValidatorAllowableClockSkewMs, >= 0; default 0
}

// UnsecuredValidator reads the unsecuredValidator* options; an error for a
// clock skew that is not a non-negative 32-bit integer or a scope item
// with characters RFC 6749 does not allow (Kafka's
// OAuthBearerConfigException).
func (j Jaas) UnsecuredValidator() (UnsecuredValidator, error) {
	opt := func(k, def string) string {
		if v := strings.TrimSpace(j.Options[k]); v != "" {
			return v
		}
		return def
	}
	v := UnsecuredValidator{
		PrincipalClaim: opt("unsecuredValidatorPrincipalClaimName", "sub"),
		ScopeClaim:     opt("unsecuredValidatorScopeClaimName", "scope"),
		RequiredScope:  strings.Fields(j.Options["unsecuredValidatorRequiredScope"]),
	}
	skew, err := strconv.ParseInt(opt("unsecuredValidatorAllowableClockSkewMs", "0"), 10, 32)
	if err != nil || skew < 0 {
		return v, fmt.Errorf("unsecuredValidatorAllowableClockSkewMs=%q: want a non-negative number of milliseconds", j.Options["unsecuredValidatorAllowableClockSkewMs"])
	}
	v.ClockSkewMs = skew
	for _, sc := range v.RequiredScope {
		for i := 0; i < len(sc); i++ {
			if c := sc[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
				return v, fmt.Errorf("unsecuredValidatorRequiredScope: invalid scope item %q (RFC 6749 scope-token)", sc)
			}
		}
	}
	return v, nil
}

// ParseJaas parses one sasl.jaas.config value.
func ParseJaas(s string) (Jaas, error) {
	toks, err := jaasTokens(s)
	if err != nil {
		return Jaas{}, err
	}
	if len(toks) < 3 || toks[len(toks)-1] != ";" {
		return Jaas{}, errors.New("JAAS config must be '<LoginModule> <flag> [name=\"value\"]... ;'")
	}
	j := Jaas{LoginModule: toks[0], Flag: strings.ToLower(toks[1]), Options: map[string]string{}}
	switch j.Flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return Jaas{}, fmt.Errorf("JAAS config: flag %q is not required, requisite, sufficient or optional", toks[1])
	}
	rest := toks[2 : len(toks)-1]
	for i := 0; i < len(rest); i += 3 {
		if i+2 >= len(rest) || rest[i+1] != "=" || rest[i] == "=" || rest[i] == ";" || rest[i+2] == ";" {
			return Jaas{}, errors.New("JAAS config: options must be name=value, and exactly one login module is allowed")
		}
		j.Options[rest[i]] = rest[i+2]
	}
	return j, nil
}

// jaasTokens splits s into words, quoted strings (unquoted), "=" and ";".
func jaasTokens(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '=' || c == ';':
			toks = append(toks, string(c))
			i++
		case c == '"':
			var b strings.Builder
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("JAAS config: unterminated quoted value")
			}
			i++
			toks = append(toks, b.String())
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n\r=;\"", rune(s[j])) {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks, nil
}
