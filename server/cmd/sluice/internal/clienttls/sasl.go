package clienttls

// SASL client settings, from --command-config (Kafka's client keys) or
// from flags, which override the file:
//
//   - security.protocol SASL_PLAINTEXT or SASL_SSL, sasl.mechanism (PLAIN,
//     SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER; Kafka's default
//     GSSAPI is refused) and sasl.jaas.config: its username and password
//     options for PLAIN and SCRAM; for OAUTHBEARER Kafka's
//     OAuthBearerLoginModule with the unsecuredLogin* options, from which
//     an unsecured token (alg none) is built afresh at each
//     authentication, as Kafka's OAuthBearerUnsecuredLoginCallbackHandler
//     does: for tests and development against the unsecured validator.
//   - --sasl-mechanism, --sasl-username, and the password read from
//     --sasl-password-file or the SLUICE_SASL_PASSWORD environment
//     variable (there is no password flag: a command line is visible to
//     every user in ps). For OAUTHBEARER the password is the bearer
//     token, and there is no user name.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/server/config"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// EnvPassword is the environment variable holding the SASL password (or
// OAUTHBEARER token) when --sasl-password-file is not given.
const EnvPassword = "SLUICE_SASL_PASSWORD"

// saslFlags are the --sasl-* flags.
type saslFlags struct {
	mechanism    string
	username     string
	passwordFile string
}

func (s *saslFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&s.mechanism, "sasl-mechanism", "", "authenticate with SASL `mechanism` PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (overrides --command-config's sasl.* keys; with --tls for SASL_SSL)")
	fs.StringVar(&s.username, "sasl-username", "", "the SASL user `name` (PLAIN, SCRAM)")
	fs.StringVar(&s.passwordFile, "sasl-password-file", "", "a `file` holding the SASL password, or OAUTHBEARER's token (default: the "+EnvPassword+" environment variable)")
}

// opts are the SASL options: the flags', else --command-config's, else
// none.
func (s *saslFlags) opts(props map[string]string) ([]kgo.Opt, error) {
	if s.mechanism == "" {
		if s.username != "" || s.passwordFile != "" {
			return nil, errors.New("--sasl-username and --sasl-password-file need --sasl-mechanism")
		}
		return propsOpts(props)
	}
	pass, err := s.password()
	if err != nil {
		return nil, err
	}
	mech := strings.ToUpper(strings.TrimSpace(s.mechanism))
	if mech == config.MechOAuthBearer {
		if s.username != "" {
			return nil, errors.New("--sasl-username: OAUTHBEARER authenticates with a token only (--sasl-password-file or " + EnvPassword + ")")
		}
		return []kgo.Opt{kgo.SASL(oauth.Auth{Token: pass}.AsMechanism())}, nil
	}
	if s.username == "" {
		return nil, fmt.Errorf("--sasl-mechanism %s needs --sasl-username", mech)
	}
	m, err := config.ClientMechanism(mech, s.username, pass)
	if err != nil {
		return nil, fmt.Errorf("--sasl-mechanism: %w", err)
	}
	return []kgo.Opt{kgo.SASL(m)}, nil
}

// password is --sasl-password-file's content without its final line end,
// else $SLUICE_SASL_PASSWORD; an error when neither gives one.
func (s *saslFlags) password() (string, error) {
	if s.passwordFile != "" {
		b, err := os.ReadFile(s.passwordFile)
		if err != nil {
			return "", fmt.Errorf("--sasl-password-file: %w", err)
		}
		p := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if p == "" {
			return "", fmt.Errorf("--sasl-password-file %s is empty", s.passwordFile)
		}
		return p, nil
	}
	if p := os.Getenv(EnvPassword); p != "" {
		return p, nil
	}
	return "", errors.New("--sasl-mechanism needs a password (or OAUTHBEARER token): --sasl-password-file FILE or the " + EnvPassword + " environment variable")
}

// propsOpts turns Kafka client properties into SASL options.
func propsOpts(props map[string]string) ([]kgo.Opt, error) {
	proto := strings.ToUpper(strings.TrimSpace(props["security.protocol"]))
	switch proto {
	case "", "PLAINTEXT", "SSL":
		return nil, nil
	case "SASL_PLAINTEXT", "SASL_SSL": // SASL_SSL's TLS: tlsConfig
	default:
		return nil, fmt.Errorf("--command-config: security.protocol=%s is not supported (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", proto)
	}
	mech := strings.ToUpper(strings.TrimSpace(props["sasl.mechanism"]))
	if mech == "" {
		mech = "GSSAPI"
	}
	j, err := config.ParseJaas(props["sasl.jaas.config"])
	if err != nil {
		return nil, fmt.Errorf("--command-config: sasl.jaas.config: %w", err)
	}
	if mech == config.MechOAuthBearer {
		if j.LoginModule != config.OAuthBearerLoginModule {
			return nil, fmt.Errorf("--command-config: sasl.mechanism=OAUTHBEARER needs sasl.jaas.config's login module %s, not %s", config.OAuthBearerLoginModule, j.LoginModule)
		}
		if _, _, err := unsecuredToken(j.Options, time.Now()); err != nil {
			return nil, fmt.Errorf("--command-config: sasl.jaas.config: %w", err)
		}
		return []kgo.Opt{kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, ext, err := unsecuredToken(j.Options, time.Now())
			return oauth.Auth{Token: tok, Extensions: ext}, err
		}))}, nil
	}
	user, pass := j.Options["username"], j.Options["password"]
	if user == "" {
		return nil, fmt.Errorf("--command-config: sasl.jaas.config has no username")
	}
	m, err := config.ClientMechanism(mech, user, pass)
	if err != nil {
		return nil, fmt.Errorf("--command-config: sasl.mechanism=%w", err)
	}
	return []kgo.Opt{kgo.SASL(m)}, nil
}

// unsecuredToken builds an unsecured JWS from OAuthBearerLoginModule's
// unsecuredLogin* options, as Kafka's
// OAuthBearerUnsecuredLoginCallbackHandler: header {"alg":"none"};
// claims iat (now) and exp (now + unsecuredLoginLifetimeSeconds, default
// 3600), unsecuredLoginStringClaim_<name>, unsecuredLoginNumberClaim_<name>
// and unsecuredLoginListClaim_<name> (the value's first character
// separates the items); the principal claim
// (unsecuredLoginPrincipalClaimName, default sub) must be among the string
// claims. unsecuredLoginExtension_<name> options are the SASL extensions.
func unsecuredToken(opts map[string]string, now time.Time) (string, map[string]string, error) {
	claims, ext := map[string]any{}, map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		v := opts[k]
		var name string
		var ok bool
		if name, ok = strings.CutPrefix(k, "unsecuredLoginExtension_"); ok {
			ext[name] = v
			continue
		}
		if name, ok = strings.CutPrefix(k, "unsecuredLoginStringClaim_"); ok {
			claims[name] = v
		} else if name, ok = strings.CutPrefix(k, "unsecuredLoginNumberClaim_"); ok {
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return "", nil, fmt.Errorf("%s=%q is not a number", k, v)
			}
			claims[name] = json.Number(v)
		} else if name, ok = strings.CutPrefix(k, "unsecuredLoginListClaim_"); ok {
			items := []string{}
			if v != "" {
				for _, it := range strings.Split(v[1:], v[:1]) {
					if it != "" {
						items = append(items, it)
					}
				}
			}
			claims[name] = items
		} else {
			continue
		}
		if name == "iat" || name == "exp" || name == "" {
			return "", nil, fmt.Errorf("%s: the claim %q cannot be set", k, name)
		}
	}
	principal := strings.TrimSpace(opts["unsecuredLoginPrincipalClaimName"])
	if principal == "" {
		principal = "sub"
	}
	if p, _ := claims[principal].(string); strings.TrimSpace(p) == "" {
		return "", nil, fmt.Errorf("no principal: set unsecuredLoginStringClaim_%s", principal)
	}
	life := int64(3600)
	if v := strings.TrimSpace(opts["unsecuredLoginLifetimeSeconds"]); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return "", nil, fmt.Errorf("unsecuredLoginLifetimeSeconds=%q: want a positive number of seconds", v)
		}
		life = n
	}
	claims["iat"] = now.Unix()
	claims["exp"] = now.Unix() + life
	body, err := json.Marshal(claims)
	if err != nil {
		return "", nil, err
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc(body) + ".", ext, nil
}
