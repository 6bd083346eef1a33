package console

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

// User is whom a console request's Kafka requests authenticate as: the
// HTTP user the broker checked (HTTP Basic, against its own SASL
// credentials), so that what the console shows is what that user may see.
// The zero User authenticates as no one (a PLAINTEXT or SSL bootstrap).
type User struct {
	// Key names the credentials: requests with the same Key share one
	// Kafka client. It must change when the password does (the broker
	// puts a hash of the password in it).
	Key string
	// SASL is the mechanism the console's clients log in with.
	SASL sasl.Mechanism
}

type userCtxKey struct{}

// WithUser returns ctx carrying u: the console serves a request whose
// context carries a User as that user (the broker's HTTP authentication
// wraps the handler with it).
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userCtxKey{}, u)
}

func userFrom(ctx context.Context) User {
	u, _ := ctx.Value(userCtxKey{}).(User)
	return u
}

// maxUserClients bounds the Kafka clients the console keeps, one per
// User; the least recently used one is closed to make room.
const maxUserClients = 16

// userClient is one User's shared client.
type userClient struct {
	cl   *kgo.Client
	adm  *kadm.Client
	used time.Time
}

// admin returns the client of ctx's User, creating it on first use.
func (c *Console) admin(ctx context.Context) (*kadm.Client, error) {
	u := userFrom(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if uc := c.clients[u.Key]; uc != nil {
		uc.used = time.Now()
		return uc.adm, nil
	}
	cl, err := kgo.NewClient(
		append([]kgo.Opt{kgo.SeedBrokers(c.cfg.Bootstrap...),
			kgo.MetadataMinAge(500 * time.Millisecond),
			kgo.ClientID("sluice-console"),
			kgo.RetryTimeout(c.cfg.RequestTimeout),
		}, c.dialOpts(u)...)...,
	)
	if err != nil {
		return nil, err
	}
	if len(c.clients) >= maxUserClients {
		oldest := ""
		for k, uc := range c.clients {
			if oldest == "" || uc.used.Before(c.clients[oldest].used) {
				oldest = k
			}
		}
		c.clients[oldest].cl.Close()
		delete(c.clients, oldest)
	}
	uc := &userClient{cl: cl, adm: kadm.NewClient(cl), used: time.Now()}
	if c.clients == nil {
		c.clients = map[string]*userClient{}
	}
	c.clients[u.Key] = uc
	return uc.adm, nil
}

// dialOpts are the options that reach Bootstrap as u: TLS if it is an
// SSL or SASL_SSL listener, u's SASL mechanism if any.
func (c *Console) dialOpts(u User) []kgo.Opt {
	var opts []kgo.Opt
	if c.cfg.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.cfg.TLS.Clone()))
	}
	if u.SASL != nil {
		opts = append(opts, kgo.SASL(u.SASL))
	}
	return opts
}

// closeClients closes every User's client (Close, under c.mu).
func (c *Console) closeClients() {
	for k, uc := range c.clients {
		uc.cl.Close()
		delete(c.clients, k)
	}
}
