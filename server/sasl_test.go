package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const saslJaas = `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`

// startSaslBroker starts a broker with a PLAINTEXT listener (returned
// first) and a SASL_PLAINTEXT one.
func startSaslBroker(t *testing.T, dir string, sets ...string) (*Broker, string, string) {
	t.Helper()
	b, plainAddr := startBroker(t, dir, append([]string{
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config=" + saslJaas,
	}, sets...)...)
	return b, plainAddr, b.ListenerAddr("SASL_PLAINTEXT").String()
}

func saslProduceConsume(t *testing.T, addr, topic string, mech sasl.Mechanism) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, addr, kgo.SASL(mech), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics(topic), kgo.RequestRetries(0), kgo.RetryTimeout(2*time.Second))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v-" + topic)}).FirstErr(); err != nil {
		return err
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		return err
	}
	if n := fs.NumRecords(); n != 1 {
		return fmt.Errorf("fetched %d records", n)
	}
	return nil
}

// saslLogin sends one Metadata request as mech and returns its error.
func saslLogin(t *testing.T, addr string, mech sasl.Mechanism) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := newClient(t, addr, kgo.SASL(mech), kgo.RequestRetries(0))
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

func TestSaslPlainFranz(t *testing.T) {
	t.Parallel()
	var ps principals
	b := newTestBroker(t, nil, slog.LevelInfo, ps.hook,
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config="+saslJaas)
	addr := b.ListenerAddr("SASL_PLAINTEXT").String()
	if err := saslProduceConsume(t, addr, "sasl-plain", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()); err != nil {
		t.Fatalf("alice: %v", err)
	}
	if !ps.has("User:alice") {
		t.Errorf("principals %v, want User:alice (the SASL user)", ps.got)
	}
	err := saslLogin(t, addr, plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism())
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v", err)
	}
	err = saslLogin(t, addr, plain.Auth{Zid: "admin", User: "alice", Pass: "alice-secret"}.AsMechanism())
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("authorization id of another user: %v", err)
	}
}

func TestSaslScramFranzAndRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b, plainAddr, addr := startSaslBroker(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, plainAddr))
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "bob-secret"},
		{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-secret"},
	})
	if err != nil || res["bob"].Err != nil || res["carol"].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	check := func(addr, round string) {
		t.Helper()
		if err := saslProduceConsume(t, addr, "scram-256"+round, scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()); err != nil {
			t.Fatalf("bob SCRAM-SHA-256: %v", err)
		}
		if err := saslProduceConsume(t, addr, "scram-512"+round, scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism()); err != nil {
			t.Fatalf("carol SCRAM-SHA-512: %v", err)
		}
		for _, m := range []sasl.Mechanism{
			scram.Auth{User: "bob", Pass: "wrong"}.AsSha256Mechanism(),
			scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism(), // no 512 credential
			scram.Auth{User: "nobody", Pass: "x"}.AsSha256Mechanism(),
		} {
			if err := saslLogin(t, addr, m); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("bad SCRAM login: %v", err)
			}
		}
	}
	check(addr, "")
	d, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || len(d) != 2 || d["bob"].CredInfos[0].Iterations != 8192 || d["carol"].CredInfos[0].Mechanism != kadm.ScramSha512 {
		t.Fatalf("describe: %v %+v", err, d)
	}
	b.Close()
	_, _, addr = startSaslBroker(t, dir)
	check(addr, "-restarted") // new topics: each check reads back its one record
}

func TestSaslAlterDescribeErrors(t *testing.T) {
	t.Parallel()
	_, plainAddr, _ := startSaslBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, plainAddr)
	up := func(name string, mech int8, iters int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iters, []byte("salt"), []byte("salted-password-32-bytes........")
		return u
	}
	del := func(name string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, mech
		return d
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		up("ok", 1, 4096), up("few", 1, 4095), up("many", 2, 16385), up("", 1, 4096), up("mech", 3, 4096), up("dup", 1, 4096), up("dup", 2, 4096),
	}
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("ghost", 1), del("twice", 1)}
	req.Upsertions = append(req.Upsertions, up("twice", 2, 5000))
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*kerr.Error{"ok": nil, "few": kerr.UnacceptableCredential, "many": kerr.UnacceptableCredential,
		"": kerr.UnacceptableCredential, "mech": kerr.UnsupportedSaslMechanism, "dup": kerr.DuplicateResource,
		"ghost": kerr.ResourceNotFound, "twice": kerr.ResourceNotFound}
	got := map[string]int16{}
	for _, r := range resp.Results {
		got[r.User] = r.ErrorCode
	}
	for u, w := range want {
		code := int16(0)
		if w != nil {
			code = w.Code
		}
		if c, ok := got[u]; !ok || c != code {
			t.Errorf("user %q: code %d (present %v), want %v", u, c, ok, w)
		}
	}
	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, n := range []string{"ok", "ok", "none"} {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = n
		dreq.Users = append(dreq.Users, u)
	}
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil || len(dresp.Results) != 2 || dresp.Results[0].ErrorCode != kerr.DuplicateResource.Code || dresp.Results[1].ErrorCode != kerr.ResourceNotFound.Code {
		t.Fatalf("describe: %v %+v", err, dresp)
	}
}

// rawSasl is a hand-driven connection to a SASL listener.
type rawSasl struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	corr int32
}

func dialSasl(t *testing.T, addr string) *rawSasl {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawSasl{t: t, c: c, r: bufio.NewReader(c)}
}

func (r *rawSasl) send(req kmsg.Request) {
	r.corr++
	buf := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, r.corr)
	if _, err := r.c.Write(buf); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawSasl) frame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r.r, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(r.r, body)
	return body, err
}

// roundTrip sends req and decodes its response into resp.
func (r *rawSasl) roundTrip(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	r.send(req)
	body, err := r.frame()
	if err != nil {
		r.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	resp := req.ResponseKind()
	body = body[4:]
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatal(err)
	}
	return resp
}

// closed asserts the broker closes the connection (nothing more to read).
func (r *rawSasl) closed(what string) {
	r.t.Helper()
	if b, err := r.frame(); err == nil {
		r.t.Fatalf("%s: got a %d-byte frame, want the connection closed", what, len(b))
	} else if errors.Is(err, errTimeout) || isTimeout(err) {
		r.t.Fatalf("%s: connection left open", what)
	}
}

var errTimeout = errors.New("timeout")

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func handshake(mech string, v int16) *kmsg.SASLHandshakeRequest {
	h := kmsg.NewPtrSASLHandshakeRequest()
	h.Version, h.Mechanism = v, mech
	return h
}

func authenticate(v int16, token []byte) *kmsg.SASLAuthenticateRequest {
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.Version, a.SASLAuthBytes = v, token
	return a
}

func TestSaslBadInput(t *testing.T) {
	t.Parallel()
	b, plainAddr, addr := startSaslBroker(t, "", "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256")
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 9

	// A request other than ApiVersions and SaslHandshake: closed.
	r := dialSasl(t, addr)
	r.send(meta)
	r.closed("Metadata before authentication")

	// ApiVersions once, then a second one: closed.
	r = dialSasl(t, addr)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "raw", "1"
	if resp := r.roundTrip(av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions: %+v", resp)
	}
	r.send(av)
	r.closed("second ApiVersions")

	// A mechanism not enabled: UNSUPPORTED_SASL_MECHANISM with the list, closed.
	r = dialSasl(t, addr)
	hs := r.roundTrip(handshake("SCRAM-SHA-512", 1)).(*kmsg.SASLHandshakeResponse)
	if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(hs.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256" {
		t.Fatalf("handshake: %+v", hs)
	}
	r.closed("unsupported mechanism")

	// Garbage and bad PLAIN tokens: SASL_AUTHENTICATION_FAILED with a message, closed.
	for _, tok := range []string{"garbage", "", "\x00alice", "admin\x00alice\x00alice-secret", "\x00alice\x00", "\x00\x00x", "\x00alice\x00wrong"} {
		r = dialSasl(t, addr)
		if hs := r.roundTrip(handshake("PLAIN", 1)).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
			t.Fatalf("handshake: %+v", hs)
		}
		ar := r.roundTrip(authenticate(2, []byte(tok))).(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil || *ar.ErrorMessage == "" {
			t.Fatalf("token %q: %+v", tok, ar)
		}
		r.closed("failed PLAIN")
	}

	// Truncated and malformed SCRAM messages.
	for _, tok := range []string{"n,,", "n,", "p=tls-unique,,n=a,r=x", "n,,n=a", "n,,r=abc", "x,,n=a,r=b", "n,,n=a=ZZ,r=b"} {
		r = dialSasl(t, addr)
		r.roundTrip(handshake("SCRAM-SHA-256", 1))
		ar := r.roundTrip(authenticate(1, []byte(tok))).(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil {
			t.Fatalf("SCRAM token %q: %+v", tok, ar)
		}
		r.closed("failed SCRAM")
	}

	// Another request while authenticating: closed.
	r = dialSasl(t, addr)
	r.roundTrip(handshake("PLAIN", 1))
	r.send(meta)
	r.closed("Metadata while authenticating")

	// An oversized frame before authentication: closed before its body.
	r = dialSasl(t, addr)
	var big [8]byte
	binary.BigEndian.PutUint32(big[:], 600000)
	r.c.Write(big[:])
	r.closed("oversized frame")

	// A good v1 exchange: SessionLifetimeMs 0 without
	// connections.max.reauth.ms; then requests are served, and
	// SaslHandshake and SaslAuthenticate are ILLEGAL_SASL_STATE.
	r = dialSasl(t, addr)
	r.roundTrip(av)
	r.roundTrip(handshake("PLAIN", 1))
	ar := r.roundTrip(authenticate(1, []byte("\x00alice\x00alice-secret"))).(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != 0 || ar.SessionLifetimeMillis != 0 {
		t.Fatalf("authenticate: %+v", ar)
	}
	if mr := r.roundTrip(meta).(*kmsg.MetadataResponse); len(mr.Brokers) == 0 {
		t.Fatalf("metadata after authentication: %+v", mr)
	}
	if hs := r.roundTrip(handshake("PLAIN", 1)).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake after authentication: %+v", hs)
	}
	if ar := r.roundTrip(authenticate(0, nil)).(*kmsg.SASLAuthenticateResponse); ar.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("authenticate after authentication: %+v", ar)
	}

	// A v0 handshake: raw tokens, the answer an empty raw frame.
	r = dialSasl(t, addr)
	r.roundTrip(handshake("PLAIN", 0))
	tok := []byte("\x00admin\x00admin-secret")
	r.c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(tok))))
	r.c.Write(tok)
	if f, err := r.frame(); err != nil || len(f) != 0 {
		t.Fatalf("raw PLAIN answer %q, %v", f, err)
	}
	if mr := r.roundTrip(meta).(*kmsg.MetadataResponse); len(mr.Brokers) == 0 {
		t.Fatalf("metadata after raw authentication: %+v", mr)
	}
	// A bad raw token closes without an answer.
	r = dialSasl(t, addr)
	r.roundTrip(handshake("PLAIN", 0))
	r.c.Write([]byte{0, 0, 0, 3, 'a', 'b', 'c'})
	r.closed("bad raw token")

	// On a PLAINTEXT listener both are ILLEGAL_SASL_STATE.
	r = dialSasl(t, plainAddr)
	if hs := r.roundTrip(handshake("PLAIN", 1)).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake on PLAINTEXT: %+v", hs)
	}

	// Nothing else disturbed.
	if err := saslProduceConsume(t, addr, "after-bad-sasl", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()); err != nil {
		t.Fatal(err)
	}
	if handlerPanics.Load() != 0 {
		t.Fatal("a handler panicked")
	}
	_ = b
}

func TestSaslReauthentication(t *testing.T) {
	t.Parallel()
	_, _, addr := startSaslBroker(t, "", "listener.name.sasl_plaintext.connections.max.reauth.ms=1500")
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 9
	login := func(r *rawSasl, user, pass string) *kmsg.SASLAuthenticateResponse {
		r.roundTrip(handshake("PLAIN", 1))
		return r.roundTrip(authenticate(1, []byte("\x00"+user+"\x00"+pass))).(*kmsg.SASLAuthenticateResponse)
	}
	r := dialSasl(t, addr)
	if ar := login(r, "alice", "alice-secret"); ar.ErrorCode != 0 || ar.SessionLifetimeMillis != 1500 {
		t.Fatalf("authenticate: %+v", ar)
	}
	time.Sleep(1100 * time.Millisecond) // past the one-second re-authentication floor
	// Re-authenticating as the same user works, and the session goes on.
	if ar := login(r, "alice", "alice-secret"); ar.ErrorCode != 0 || ar.SessionLifetimeMillis != 1500 {
		t.Fatalf("re-authenticate: %+v", ar)
	}
	r.roundTrip(meta)
	time.Sleep(1100 * time.Millisecond) // past the floor again; not a wait for a condition
	// As another user: refused and closed.
	if ar := login(r, "admin", "admin-secret"); ar.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authenticate as another user: %+v", ar)
	}
	r.closed("re-authenticated as another user")

	// Past the session's end, a request other than SaslHandshake closes.
	r = dialSasl(t, addr)
	login(r, "alice", "alice-secret")
	time.Sleep(1600 * time.Millisecond) // past the 1.5 s session; not a wait for a condition
	r.send(meta)
	r.closed("request after the session expired")

	// franz-go re-authenticates on its own and keeps working.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, addr, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()), kgo.DefaultProduceTopic("reauth"), kgo.AllowAutoTopicCreation())
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		time.Sleep(1 * time.Second) // the produces span sessions on purpose; not a wait for a condition
	}
}

// kcat (librdkafka) over SASL_PLAINTEXT with PLAIN and SCRAM.
func TestSaslKcat(t *testing.T) {
	t.Parallel()
	kcat := needTool(t, "kcat")
	_, plainAddr, addr := startSaslBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, plainAddr))
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"},
	}); err != nil || res["bob"].Err == nil {
		// Kafka refuses a user twice in one request: DUPLICATE_RESOURCE.
		t.Fatalf("alter twice: %v %+v", err, res)
	}
	for _, m := range []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512} {
		if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: m, Iterations: 4096, Password: "bob-secret"}}); err != nil || res["bob"].Err != nil {
			t.Fatalf("alter: %v %+v", err, res)
		}
	}
	for _, tc := range []struct{ mech, user, pass string }{
		{"PLAIN", "alice", "alice-secret"},
		{"SCRAM-SHA-256", "bob", "bob-secret"},
		{"SCRAM-SHA-512", "bob", "bob-secret"},
	} {
		topic := "kcat-" + strings.ToLower(tc.mech)
		args := []string{"-b", addr, "-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=" + tc.mech,
			"-X", "sasl.username=" + tc.user, "-X", "sasl.password=" + tc.pass, "-t", topic}
		runTool(t, "k1:v1\n", kcat, append(args, "-P", "-K:")...)
		out := runTool(t, "", kcat, append(args, "-C", "-e", "-q", "-o", "beginning", "-f", "%k=%s\n")...)
		if out != "k1=v1\n" {
			t.Fatalf("%s: kcat consumed %q", tc.mech, out)
		}
	}
	// A wrong password fails.
	cmdOut, err := runToolErr(kcat, "-b", addr, "-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=PLAIN",
		"-X", "sasl.username=alice", "-X", "sasl.password=wrong", "-L", "-m", "5")
	if err == nil {
		t.Fatalf("kcat with a wrong password succeeded:\n%s", cmdOut)
	}
}

func runToolErr(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

const confluentSaslScript = `
import sys
from confluent_kafka import Producer, Consumer, TopicPartition
addr, mech, user, pw, topic = sys.argv[1:6]
conf = {'bootstrap.servers': addr, 'security.protocol': 'SASL_PLAINTEXT', 'sasl.mechanisms': mech}
if mech == 'OAUTHBEARER':  # librdkafka's unsecured JWT; user is sasl.oauthbearer.config
    conf.update({'enable.sasl.oauthbearer.unsecure.jwt': True, 'sasl.oauthbearer.config': user})
else:
    conf.update({'sasl.username': user, 'sasl.password': pw})
p = Producer(dict(conf, acks='all'))
p.produce(topic, key=b'k', value=b'v')
assert p.flush(30) == 0
c = Consumer(dict(conf, **{'group.id': 'unused', 'enable.auto.commit': False}))
c.assign([TopicPartition(topic, 0, 0)])
m = c.poll(10)
assert m is not None and m.error() is None, m
assert (m.key(), m.value()) == (b'k', b'v')
c.close()
`

const kafkaPythonSaslScript = `
import sys
from kafka import KafkaProducer
addr, mech, user, pw, topic = sys.argv[1:6]
p = KafkaProducer(bootstrap_servers=addr, security_protocol='SASL_PLAINTEXT', sasl_mechanism=mech, sasl_plain_username=user, sasl_plain_password=pw, acks='all')
p.send(topic, value=b'v').get(timeout=30)
p.close()
`

// confluent-kafka-python and kafka-python log in with PLAIN and SCRAM.
func TestSaslPythonClients(t *testing.T) {
	t.Parallel()
	_, plainAddr, addr := startSaslBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, plainAddr))
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-secret"}}); err != nil || res["bob"].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	logins := [][3]string{{"PLAIN", "alice", "alice-secret"}, {"SCRAM-SHA-512", "bob", "bob-secret"}}
	t.Run("confluent", func(t *testing.T) {
		py := pythonWith(t, "confluent_kafka")
		for _, l := range logins {
			runTool(t, "", py, "-c", confluentSaslScript, addr, l[0], l[1], l[2], "ck-"+strings.ToLower(l[0]))
		}
	})
	t.Run("kafka-python", func(t *testing.T) {
		py := pythonWith(t, "kafka")
		for _, l := range logins {
			runTool(t, "", py, "-c", kafkaPythonSaslScript, addr, l[0], l[1], l[2], "kp-"+strings.ToLower(l[0]))
		}
	})
}

// In a cluster, a SCRAM credential altered through a broker that is not
// the controller is forwarded, replicated to every node, and described by
// each.
func TestScramCredentialsReplicated(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	var ctrl int32
	eventually(t, 30*time.Second, "a controller", func() error {
		if ctrl = tc.broker(0).cl.controllerID(); ctrl < 1 {
			return errors.New("none yet")
		}
		return nil
	})
	other := int(ctrl) % 3 // 0-based index of a node that is not the controller
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = "alice", 2, 8192, []byte("salt"), []byte("salted")
	req.Upsertions = append(req.Upsertions, u)
	var resp kmsg.Response
	eventually(t, 30*time.Second, "AlterUserScramCredentials through a non-controller", func() error {
		var err error
		resp, err = tc.direct(other).Broker(other+1).Request(ctx, req)
		if err != nil {
			return err
		}
		if rs := resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results; len(rs) != 1 || rs[0].ErrorCode != 0 {
			return fmt.Errorf("results %+v", rs)
		}
		return nil
	})
	for i := range 3 {
		eventually(t, 30*time.Second, fmt.Sprintf("node %d has the credential", i+1), func() error {
			c, ok := tc.broker(i).meta.ScramCredential("alice", 2)
			if !ok || c.Iterations != 8192 {
				return fmt.Errorf("%+v %v", c, ok)
			}
			return nil
		})
		dresp, err := tc.direct(i).Broker(i+1).Request(ctx, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest())
		if err != nil {
			t.Fatal(err)
		}
		if rs := dresp.(*kmsg.DescribeUserSCRAMCredentialsResponse).Results; len(rs) != 1 || rs[0].User != "alice" || rs[0].CredentialInfos[0].Iterations != 8192 {
			t.Fatalf("node %d describes %+v", i+1, rs)
		}
	}
}
