package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// problems returns the keys named by err's *Errors, in order.
func problems(t *testing.T, err error) []string {
	t.Helper()
	var keys []string
	for _, e := range flatten(err) {
		var ce *Error
		if !errors.As(e, &ce) {
			t.Fatalf("not a *config.Error: %v", e)
		}
		keys = append(keys, ce.Key)
	}
	return keys
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.LogFlushIntervalMessages != 1 || c.LogRetentionMs != 168*3600*1000 || c.LogFlushIntervalMs != math.MaxInt64 {
		t.Errorf("defaults: %+v", c)
	}
	if got := formatListeners(c.AdvertisedListeners); got != "PLAINTEXT://127.0.0.1:9092" {
		t.Errorf("advertised = %s", got)
	}
}

func TestLoadServerProperties(t *testing.T) {
	c, err := Load("testdata/server.properties", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.NodeID = 7
	want.Listeners = []Listener{{"PLAINTEXT", "0.0.0.0", 9092}, {"INTERNAL", "127.0.0.1", 9093}}
	want.AdvertisedListeners = []Listener{{"PLAINTEXT", "broker-7.example.com", 9092}}
	want.advertisedGiven = want.AdvertisedListeners
	want.ListenerSecurityProtocolMap = map[string]string{"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT", "SSL": "SSL"}
	want.LogDirs = []string{"/var/lib/sluice/data-1", "/var/lib/sluice/data-2"}
	want.NumPartitions = 3
	want.LogFlushIntervalMessages = math.MaxInt64
	want.LogRetentionMs = 72 * 3600 * 1000
	want.LogSegmentBytes = 512 << 20
	want.LogCleanupPolicy = CleanupCompact | CleanupDelete
	want.CompressionType = "zstd"
	want.AutoCreateTopicsEnable = false
	want.GroupInitialRebalanceDelayMs = 0
	want.OffsetsTopicReplicationFactor = 1
	want.LogMessageTimestampType = "LogAppendTime"
	want.QuorumVoters = want.soloVoter()
	c.set, want.set = keyBits{}, keyBits{}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got\n%+v\nwant\n%+v", c, want)
	}
}

func TestLoadSetOverridesFile(t *testing.T) {
	p := writeFile(t, "num.partitions=3\nlog.dirs=/a\nnode.id=2\n")
	c, err := Load(p, []string{"num.partitions=5", "log.dirs=/b", "num.partitions=6", "compression.type=lz4"})
	if err != nil {
		t.Fatal(err)
	}
	if c.NumPartitions != 6 || !slices.Equal(c.LogDirs, []string{"/b"}) || c.NodeID != 2 || c.CompressionType != "lz4" {
		t.Errorf("got %+v", c)
	}
}

func TestLoadUnknownKey(t *testing.T) {
	p := writeFile(t, "num.partitions=2\n\n# a comment\nnum.network.thread=3\nzookeeper.connect=localhost:2181\n")
	_, err := Load(p, []string{"no.such.key=1"})
	if !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("err = %v", err)
	}
	if got := problems(t, err); !slices.Equal(got, []string{"no.such.key", "num.network.thread", "zookeeper.connect"}) {
		t.Errorf("keys = %v", got)
	}
	msg := err.Error()
	for _, s := range []string{
		p + `:4: unknown key "num.network.thread": did you mean "num.network.threads"?`,
		p + `:5: unknown key "zookeeper.connect": a ZooKeeper setting`,
		`--set: unknown key "no.such.key"` + "\n",
	} {
		if !strings.Contains(msg+"\n", s) {
			t.Errorf("error %q lacks %q", msg, s)
		}
	}
}

// The suggestion is the nearest key, whichever table holds it and
// wherever it sorts (a typo of Sluice's own keys and of Kafka's).
func TestSuggestNearestKey(t *testing.T) {
	for typo, want := range map[string]string{
		"num.partitons":       "num.partitions",
		"node.idd":            "node.id",
		"listenrs":            "listeners",
		"metrics.listn":       "metrics.listen",
		"log.segment.byte":    "log.segment.bytes",
		"log.retention.hourz": "log.retention.hours",
		"log.retension.hours": "log.retention.hours",
		"num.network.thread":  "num.network.threads",
	} {
		if got := suggest(typo); got != want {
			t.Errorf("suggest(%q) = %q, want %q", typo, got, want)
		}
	}
}

// TestLoadKafkaKeysUnacted: Kafka's keys that Sluice has no behaviour for
// are accepted (their values checked by their Kafka type) and listed by
// Unacted; listener.name.<listener>.<key> overrides too.
func TestLoadKafkaKeysUnacted(t *testing.T) {
	p := writeFile(t, "num.io.threads=8\nnum.network.threads=3\nsocket.send.buffer.bytes=102400\nlistener.name.plaintext.ssl.keystore.password=pw\nnum.partitions=2\n")
	c, err := Load(p, []string{"share.coordinator.state.topic.min.isr=1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"listener.name.plaintext.ssl.keystore.password", "num.io.threads", "num.network.threads", "share.coordinator.state.topic.min.isr", "socket.send.buffer.bytes"}
	if got := c.Unacted(); !slices.Equal(got, want) {
		t.Errorf("Unacted = %v, want %v", got, want)
	}
	if c.NumPartitions != 2 {
		t.Errorf("num.partitions = %d", c.NumPartitions)
	}
	if d := Default(); len(d.Unacted()) != 0 {
		t.Errorf("Default().Unacted = %v", d.Unacted())
	}
	p = writeFile(t, "num.io.threads=eight\nbackground.threads=10\nlog.preallocate=maybe\n")
	_, err = Load(p, nil)
	if got := problems(t, err); !slices.Equal(got, []string{"log.preallocate", "num.io.threads"}) {
		t.Errorf("keys = %v (err %v)", got, err)
	}
	for _, s := range []string{p + `:1: num.io.threads="eight": must be an integer in [-2147483648, 2147483647]`, p + `:3: log.preallocate="maybe": must be true or false`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
}

// TestLoadLineNumbers: every problem with a key given in the file names
// its line, whether Set or Validate found it, also through a synonym.
func TestLoadLineNumbers(t *testing.T) {
	p := writeFile(t, "num.partitions=2\nlog.segment.bytes=abc\n\nqueued.max.request.bytes=10\nlog.retention.hours=-5\n")
	_, err := Load(p, nil)
	for _, s := range []string{
		p + `:2: log.segment.bytes="abc"`,
		p + `:4: queued.max.request.bytes="10": must be at least socket.request.max.bytes`,
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
}

// TestKafkaKeysDefaults: the Kafka default kafkaKeys gives for each key
// Sluice honours is Sluice's default too, but for the differences the
// package doc and the fields' docs describe.
func TestKafkaKeysDefaults(t *testing.T) {
	differs := map[string]bool{
		"node.id": true, "broker.id": true, "process.roles": true, "controller.listener.names": true,
		"listeners": true, "advertised.listeners": true, "listener.security.protocol.map": true, "inter.broker.listener.name": true,
		"log.dirs": true, "log.dir": true, "log.flush.interval.messages": true, "log.flush.interval.ms": true,
		"queued.max.request.bytes": true, "metadata.log.segment.bytes": true,
		// Kafka's default is null: the hours synonym's default applies.
		"log.retention.ms": true, "log.roll.ms": true,
	}
	d := Default()
	seen := map[string]bool{}
	for _, k := range kafkaKeys {
		if seen[k.name] {
			t.Errorf("%s is listed twice", k.name)
		}
		seen[k.name] = true
		e, ok := entries[k.name]
		if !ok {
			if k.def != "" {
				t.Errorf("%s: a default for a key Sluice does not honour", k.name)
			}
			continue
		}
		if e.spec != e.canon || differs[k.name] {
			continue
		}
		if v, _ := d.String(k.name); v != k.def {
			t.Errorf("%s: Sluice's default %q, Kafka's %q", k.name, v, k.def)
		}
	}
	for name := range entries {
		if !seen[name] && !strings.HasPrefix(name, "sluice.") && name != "metrics.listen" && name != "producer.id.expiration.check.interval.ms" {
			t.Errorf("%s: in keyTable but not in kafkaKeys", name)
		}
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	p := writeFile(t, strings.Join([]string{
		"num.partitions=0",
		"log.segment.bytes=abc",
		"compression.type=brotli",
		"auto.create.topics.enable=yes",
		"message.max.bytes=99999999999",
		"listeners=SASL_SSL://:9093", // no keystore
		"log.cleanup.policy=delete,archive",
		"log.dirs=",
	}, "\n"))
	_, err := Load(p, []string{"default.replication.factor=40000", "novalue"})
	if err == nil {
		t.Fatal("no error")
	}
	got := problems(t, err)
	want := []string{
		"", // --set novalue
		"auto.create.topics.enable", "compression.type", "default.replication.factor",
		"log.cleanup.policy", "log.dirs", "log.segment.bytes", "message.max.bytes", "num.partitions",
		"listeners", // SASL_SSL without a keystore: from Validate, after every Set
	}
	if !slices.Equal(got, want) {
		t.Errorf("keys = %q\nwant   %q\n%v", got, want, err)
	}
	msg := err.Error()
	for _, s := range []string{
		`num.partitions="0": must be >= 1`,
		// Broker defaults of topic configs read values with the topic
		// table's parser, in Kafka's words.
		`message.max.bytes="99999999999": Not a number of type INT`,
		`default.replication.factor="40000": must be an integer in [1, 32767]`,
		`compression.type="brotli": String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer`,
		`log.cleanup.policy="delete,archive": String must be one of: compact, delete`,
		`log.dirs="": must name at least one directory`,
		`listener SASL_SSL (SASL_SSL): a TLS listener needs its certificate`,
		`"novalue" is not key=value`,
	} {
		if !strings.Contains(msg, s) {
			t.Errorf("error lacks %q:\n%v", s, msg)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.properties"), []string{"bad.key=1"})
	if !errors.Is(err, os.ErrNotExist) || !errors.Is(err, ErrUnknownKey) {
		t.Errorf("err = %v", err)
	}
}

func TestLoadSyntaxErrorNamesFileAndLine(t *testing.T) {
	p := writeFile(t, "# one\nnode.id=\\u12\n")
	_, err := Load(p, nil)
	if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), p+`:2: malformed \uxxxx escape`) {
		t.Errorf("err = %v", err)
	}
}

func TestListeners(t *testing.T) {
	for _, tc := range []struct {
		sets    []string
		want    string // listeners, then advertised, joined by " | "
		wantErr string
	}{
		{[]string{"listeners=PLAINTEXT://:9092"}, "PLAINTEXT://:9092 | PLAINTEXT://127.0.0.1:9092", ""},
		{[]string{"listeners=plaintext://[::1]:0"}, "PLAINTEXT://[::1]:0 | PLAINTEXT://[::1]:0", ""},
		{[]string{"listeners= PLAINTEXT://0.0.0.0:9092 , INTERNAL://10.0.0.1:9093", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"},
			"", "PLAINTEXT://0.0.0.0:9092 binds every interface, and clients cannot connect to 0.0.0.0: set advertised.listeners"},
		{[]string{"listeners=PLAINTEXT://[::]:9092"}, "", "clients cannot connect to ::: set advertised.listeners"},
		{[]string{"listeners=PLAINTEXT://0.0.0.0:9092", "advertised.listeners=PLAINTEXT://broker1:9092"}, "PLAINTEXT://0.0.0.0:9092 | PLAINTEXT://broker1:9092", ""},
		{[]string{"advertised.listeners=PLAINTEXT://:9000", "listeners=PLAINTEXT://:0"}, "PLAINTEXT://:0 | PLAINTEXT://127.0.0.1:9000", ""},
		{[]string{"listeners=PLAINTEXT://:1", "advertised.listeners="}, "PLAINTEXT://:1 | PLAINTEXT://127.0.0.1:1", ""},
		{[]string{"listeners=SSL://:9093"}, "", `listeners="SSL://:9093": listener SSL (SSL): a TLS listener needs its certificate`},
		{[]string{"listeners=SASL_SSL://:9093"}, "", `a TLS listener needs its certificate`},
		{[]string{"listeners=INTERNAL://:9093"}, "", `listener name INTERNAL is not in listener.security.protocol.map`},
		{[]string{"listeners=PLAINTEXT://localhost"}, "", `listeners="PLAINTEXT://localhost": "PLAINTEXT://localhost": want host:port`},
		{[]string{"listeners=localhost:9092"}, "", `is not NAME://host:port`},
		{[]string{"listeners=PLAINTEXT://h:65536"}, "", `port must be in [0, 65535]`},
		{[]string{"listeners=PLAINTEXT://h!:1"}, "", `bad host "h!"`},
		{[]string{"listeners="}, "", `listeners="": must name at least one listener`},
		{[]string{"listeners=PLAINTEXT://a:1,PLAINTEXT://b:2"}, "", `listener name PLAINTEXT is used twice`},
		{[]string{"listener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT", "listeners=A://:1,B://:1"}, "", `port 1 is used twice`},
		{[]string{"listener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT", "listeners=A://:0,B://:0"}, "A://:0,B://:0 | A://127.0.0.1:0,B://127.0.0.1:0", ""},
		{[]string{"advertised.listeners=PLAINTEXT://0.0.0.0:9092"}, "", `cannot advertise the wildcard address "0.0.0.0"`},
		{[]string{"advertised.listeners=OTHER://h:1"}, "", `advertised.listeners="OTHER://h:1": listener name OTHER is not among the listeners`},
		{[]string{"listener.security.protocol.map=A:TLS"}, "", `unknown security protocol "TLS"`},
	} {
		c, err := Load("", tc.sets)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err = %v, want %q", tc.sets, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.sets, err)
			continue
		}
		got := formatListeners(c.Listeners) + " | " + formatListeners(c.AdvertisedListeners)
		if got != tc.want {
			t.Errorf("%q: got %s, want %s", tc.sets, got, tc.want)
		}
	}
}

func TestListenerAddr(t *testing.T) {
	ls, err := ParseListeners("PLAINTEXT://[fe80::1%eth0]:9092, X://:0")
	if err != nil {
		t.Fatal(err)
	}
	if ls[0].Host != "fe80::1%eth0" || ls[0].Addr() != "[fe80::1%eth0]:9092" || ls[1].Addr() != ":0" {
		t.Errorf("got %+v", ls)
	}
}

func TestRetentionPrecedence(t *testing.T) {
	const h, m = 3600 * 1000, 60 * 1000
	for _, tc := range []struct {
		file string
		sets []string
		want int64
	}{
		{"", nil, 168 * h},
		{"log.retention.hours=1", nil, h},
		{"log.retention.hours=1\nlog.retention.minutes=5", nil, 5 * m},
		{"log.retention.minutes=5\nlog.retention.hours=1", nil, 5 * m},
		{"log.retention.ms=1234\nlog.retention.minutes=5\nlog.retention.hours=1", nil, 1234},
		{"log.retention.ms=1234", []string{"log.retention.hours=2"}, 1234}, // by name, not by source
		{"log.retention.hours=1", []string{"log.retention.minutes=7"}, 7 * m},
		{"log.retention.hours=-1", nil, -1},
		{"log.retention.minutes=-5", nil, -1},
		{"log.retention.ms=-1", nil, -1},
		{"log.retention.hours=2147483647", nil, math.MaxInt32 * h},
	} {
		p := writeFile(t, tc.file)
		c, err := Load(p, tc.sets)
		if err != nil {
			t.Errorf("%q %q: %v", tc.file, tc.sets, err)
			continue
		}
		if c.LogRetentionMs != tc.want {
			t.Errorf("%q %q: LogRetentionMs = %d, want %d", tc.file, tc.sets, c.LogRetentionMs, tc.want)
		}
	}
	if _, err := Load("", []string{"log.retention.ms=-2"}); err == nil {
		t.Error("log.retention.ms=-2 accepted")
	}
}

func TestRollAndDirSynonyms(t *testing.T) {
	c, err := Load("", []string{"log.roll.hours=2", "log.dir=/old"})
	if err != nil {
		t.Fatal(err)
	}
	if c.LogRollMs != 2*3600*1000 || !slices.Equal(c.LogDirs, []string{"/old"}) {
		t.Errorf("got roll %d dirs %q", c.LogRollMs, c.LogDirs)
	}
	c, err = Load(writeFile(t, "log.dirs=/new1,/new2\nlog.roll.ms=5\n"), []string{"log.dir=/old", "log.roll.hours=2"})
	if err != nil {
		t.Fatal(err)
	}
	if c.LogRollMs != 5 || !slices.Equal(c.LogDirs, []string{"/new1", "/new2"}) {
		t.Errorf("got roll %d dirs %q", c.LogRollMs, c.LogDirs)
	}
	_, err = Load("", []string{"log.roll.hours=0", "log.dir="})
	if got := problems(t, err); !slices.Equal(got, []string{"log.dir", "log.roll.hours"}) {
		t.Errorf("keys = %q (%v)", got, err)
	}
}

func TestSetParsing(t *testing.T) {
	c := Default()
	for _, kv := range [][2]string{
		{"auto.create.topics.enable", "FALSE"}, {"auto.create.topics.enable", " True "},
		{"node.id", "+0"}, {"log.flush.interval.ms", "9223372036854775807"},
		{"log.cleanup.policy", "delete, compact"}, {"log.cleanup.policy", "compact"},
	} {
		if err := c.Set(kv[0], kv[1]); err != nil {
			t.Errorf("Set(%q, %q): %v", kv[0], kv[1], err)
		}
	}
	if !c.AutoCreateTopicsEnable || c.NodeID != 0 || c.LogCleanupPolicy != CleanupCompact {
		t.Errorf("got %+v", c)
	}
	before := c
	for _, kv := range [][2]string{
		{"auto.create.topics.enable", "1"}, {"node.id", "0x10"}, {"node.id", "1_000"}, {"node.id", "-1"},
		{"log.segment.bytes", "13"}, {"log.flush.interval.ms", "9223372036854775808"},
		{"compression.type", "GZIP"}, {"log.message.timestamp.type", "createtime"}, {"log.cleanup.policy", ""},
		{"log.dirs", "/a,,/b"}, {"listeners", "PLAINTEXT://:1,"},
	} {
		err := c.Set(kv[0], kv[1])
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != kv[0] || !errors.Is(err, ErrInvalidValue) {
			t.Errorf("Set(%q, %q) = %v", kv[0], kv[1], err)
		}
	}
	if !reflect.DeepEqual(c, before) {
		t.Error("a failed Set changed the config")
	}
}

func TestKeys(t *testing.T) {
	keys := Keys()
	if !sort.StringsAreSorted(keys) || len(keys) != len(keyTable) {
		t.Fatalf("Keys() = %q", keys)
	}
	def := Default()
	for _, syn := range []string{"log.dir", "log.roll.hours", "log.retention.minutes", "log.retention.hours"} {
		if slices.Contains(keys, syn) {
			t.Errorf("Keys() lists synonym %s", syn)
		}
		if _, ok := def.String(syn); ok {
			t.Errorf("String(%s) ok", syn)
		}
	}
	if got := Synonyms("log.retention.ms"); !slices.Equal(got, []string{"log.retention.minutes", "log.retention.hours"}) {
		t.Errorf("Synonyms = %q", got)
	}
	keys[0] = "mutated"
	if Keys()[0] == "mutated" {
		t.Error("Keys shares its slice")
	}
}

// TestStringRoundTrip: Set(k, String(k)) changes nothing, for every key, on
// the defaults and on a config where every value differs from them.
func TestStringRoundTrip(t *testing.T) {
	loaded, err := Load("testdata/server.properties", []string{
		"log.retention.ms=-1", "log.roll.ms=1", "log.retention.bytes=5", "message.max.bytes=0",
		"log.flush.interval.ms=0", "min.insync.replicas=2", "offsets.topic.num.partitions=1",
		"offsets.topic.replication.factor=32767", "log.index.interval.bytes=0", "log.index.size.max.bytes=4",
		"log.segment.delete.delay.ms=0", "log.retention.check.interval.ms=1",
		"listeners=PLAINTEXT://[::1]:0,INTERNAL://:1",
	})
	if err != nil {
		t.Fatal(err)
	}
	clustered, err := Load("", node(2, "controller.listener.names=CONTROLLER,RAFT",
		"listeners=PLAINTEXT://127.0.0.1:9093,CONTROLLER://127.0.0.1:9193,RAFT://[::1]:9293",
		"controller.quorum.bootstrap.servers=127.0.0.1:9192,[::1]:9193", "broker.rack=r1", "broker.heartbeat.interval.ms=500",
		"broker.session.timeout.ms=3000", "replica.lag.time.max.ms=10000", "process.roles=controller,broker"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{Default(), loaded, clustered} {
		for _, k := range Keys() {
			v, ok := c.String(k)
			if !ok {
				t.Fatalf("String(%q) not ok", k)
			}
			after := c
			if err := after.Set(k, v); err != nil {
				t.Errorf("Set(%q, %q): %v", k, v, err)
				continue
			}
			after.set = c.set
			after.advertisedGiven = c.advertisedGiven // a derived value set as given: the same AdvertisedListeners
			if !reflect.DeepEqual(after, c) {
				t.Errorf("Set(%q, %q) changed the config", k, v)
			}
		}
	}
}

// TestTableCoversFields: every exported field is reached by some key, so
// the table and the struct cannot drift apart.
func TestTableCoversFields(t *testing.T) {
	def := Default()
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		c := Default()
		v := reflect.ValueOf(&c).Elem().Field(i)
		switch v.Kind() {
		case reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(v.Int() - 1)
		case reflect.Uint8:
			v.SetUint(v.Uint() ^ 3)
		case reflect.Float64:
			v.SetFloat(v.Float() / 2)
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Slice:
			elem := reflect.Zero(v.Type().Elem())
			if elem.Kind() == reflect.String { // "" joins to nothing in an empty list
				elem = reflect.ValueOf("x")
			}
			v.Set(reflect.Append(v, elem))
		case reflect.Struct: // SSL: each of its fields must be reached
			for j := range v.NumField() {
				c2 := Default()
				sub := reflect.ValueOf(&c2).Elem().Field(i).Field(j)
				switch sub.Kind() {
				case reflect.String:
					sub.SetString(sub.String() + "x")
				case reflect.Slice:
					sub.Set(reflect.Append(sub, reflect.ValueOf("x")))
				default:
					t.Fatalf("field %s.%s: kind %s not handled", f.Name, v.Type().Field(j).Name, sub.Kind())
				}
				changed := false
				for _, k := range Keys() {
					a, _ := def.String(k)
					b, _ := c2.String(k)
					changed = changed || a != b
				}
				if !changed {
					t.Errorf("field %s.%s is not reached by any key", f.Name, v.Type().Field(j).Name)
				}
			}
			continue
		case reflect.Map:
			empty := v.Len() == 0
			v.Set(reflect.MakeMap(v.Type()))
			if empty { // empty by default: add an entry instead
				v.SetMapIndex(reflect.ValueOf("h"), reflect.Zero(v.Type().Elem()))
			}
		default:
			t.Fatalf("field %s: kind %s not handled", f.Name, v.Kind())
		}
		changed := false
		for _, k := range Keys() {
			a, _ := def.String(k)
			b, _ := c.String(k)
			changed = changed || a != b
		}
		if !changed {
			t.Errorf("field %s is not reached by any key", f.Name)
		}
	}
}

func TestSource(t *testing.T) {
	c, err := Load("", []string{"num.partitions=1", "log.retention.hours=1"})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]Source{
		"num.partitions":        SourceStatic, // set, even if to the default value
		"node.id":               SourceDefault,
		"log.retention.ms":      SourceStatic, // through its synonym
		"log.retention.hours":   SourceStatic,
		"log.retention.minutes": SourceDefault,
		"advertised.listeners":  SourceDefault,
	} {
		if got, ok := c.Source(key); !ok || got != want {
			t.Errorf("Source(%s) = %v, %v; want %v", key, got, ok, want)
		}
	}
	if _, ok := c.Source("nope"); ok {
		t.Error("Source of an unknown key ok")
	}
	c.Set("advertised.listeners", "PLAINTEXT://h:1")
	c.Set("listeners", "PLAINTEXT://:2")
	if s, _ := c.Source("advertised.listeners"); s != SourceStatic || c.AdvertisedListeners[0].Host != "h" {
		t.Errorf("explicit advertised.listeners: %v %+v", s, c.AdvertisedListeners)
	}
	c.Set("advertised.listeners", "")
	if s, _ := c.Source("advertised.listeners"); s != SourceDefault || c.AdvertisedListeners[0].Port != 2 {
		t.Errorf("unset advertised.listeners: %v %+v", s, c.AdvertisedListeners)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Default()
	c.NumPartitions = 0
	c.LogSegmentBytes = 1
	c.CompressionType = "brotli"
	c.LogDirs = nil
	c.AdvertisedListeners = nil
	c.LogCleanupPolicy = 0
	got := problems(t, c.Validate())
	// A broker needs an advertised listener: a rule between keys, after
	// the keys' own.
	want := []string{"log.dirs", "num.partitions", "log.segment.bytes", "compression.type", "log.cleanup.policy", "advertised.listeners"}
	if !slices.Equal(got, want) {
		t.Errorf("keys = %q, want %q", got, want)
	}
}

// Kafka's broker.id is node.id's synonym; when both are set they must be
// equal, as Kafka requires.
func TestBrokerID(t *testing.T) {
	c, err := Load("", []string{"broker.id=7"})
	if err != nil || c.NodeID != 7 {
		t.Fatalf("broker.id=7: node id %d, %v", c.NodeID, err)
	}
	if c, err := Load("", []string{"broker.id=3", "node.id=3"}); err != nil || c.NodeID != 3 {
		t.Fatalf("both 3: node id %d, %v", c.NodeID, err)
	}
	if _, err := Load("", []string{"broker.id=3", "node.id=4"}); err == nil || !strings.Contains(err.Error(), "must be equal") {
		t.Fatalf("broker.id=3, node.id=4: %v", err)
	}
}

func TestConnectionKeys(t *testing.T) {
	c, err := Load("", []string{"max.connections.per.ip.overrides=10.0.0.1:5, broker-a:0,::1:7,[fe80::1]:2", "queued.max.request.bytes=-1", "connections.max.idle.ms=-1"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int32{"10.0.0.1": 5, "broker-a": 0, "::1": 7, "fe80::1": 2}
	if !reflect.DeepEqual(c.MaxConnectionsPerIPOverrides, want) {
		t.Fatalf("overrides %v, want %v", c.MaxConnectionsPerIPOverrides, want)
	}
	if v, _ := c.String("max.connections.per.ip.overrides"); v != "10.0.0.1:5,::1:7,broker-a:0,fe80::1:2" {
		t.Fatalf("String: %q", v)
	}
	for _, bad := range [][]string{
		{"max.connections.per.ip.overrides=host"},
		{"max.connections.per.ip.overrides=host:-1"},
		{"max.connections.per.ip.overrides=a:1,a:2"},
		{"queued.max.request.bytes=1000"}, // below socket.request.max.bytes
		{"max.connections.per.ip=0"},      // without overrides
		{"fetch.max.bytes=1023"},
		{"sluice.request.receive.timeout.ms=0"},
		{"metrics.listen=9644"},
		{"metrics.listen=127.0.0.1:http"},
		{"metrics.listen=127.0.0.1:70000"},
		{"sluice.broker.down.warning.interval.ms=0"},
	} {
		if _, err := Load("", bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if _, err := Load("", []string{"max.connections.per.ip=0", "max.connections.per.ip.overrides=127.0.0.1:10"}); err != nil {
		t.Fatal(err)
	}
	for _, good := range []string{"127.0.0.1:9644", ":9644", "[::1]:0", ""} {
		if c, err := Load("", []string{"metrics.listen=" + good}); err != nil || c.MetricsListen != good {
			t.Errorf("metrics.listen=%s: %v", good, err)
		}
	}
	// On by default, on this machine only; "none" turns it off; Source
	// tells the default (a port that may be taken) from a choice.
	d := Default()
	if src, _ := d.Source("metrics.listen"); d.MetricsListen != "127.0.0.1:9644" || src != SourceDefault {
		t.Errorf("default metrics.listen %q (%v)", d.MetricsListen, src)
	}
	if c, err := Load("", []string{"metrics.listen=none"}); err != nil || c.MetricsListen != "" {
		t.Errorf("metrics.listen=none: %q %v", c.MetricsListen, err)
	}
	d, _ = Load("", []string{"metrics.listen=127.0.0.1:9644"})
	if src, _ := d.Source("metrics.listen"); src != SourceStatic {
		t.Error("metrics.listen given explicitly reads as the default")
	}
}

// socket.request.max.bytes stays below what "SLRT"/"SLRF", the first bytes
// of a raft connection, read as.
func TestSocketRequestMaxBytesCap(t *testing.T) {
	if c, err := Load("", []string{"socket.request.max.bytes=1000000000", "queued.max.request.bytes=-1"}); err != nil || c.SocketRequestMaxBytes != 1e9 {
		t.Fatalf("1e9: %v", err)
	}
	for _, v := range []string{"1000000001", "1397510726", "2147483647"} {
		_, err := Load("", []string{"socket.request.max.bytes=" + v, "queued.max.request.bytes=-1"})
		if err == nil || !strings.Contains(err.Error(), `must be in [1, 1000000000]: raft connections share the inter-broker listener`) || !strings.Contains(err.Error(), `"SLRT"`) {
			t.Errorf("%s: %v", v, err)
		}
	}
	if _, err := Load("", []string{"socket.request.max.bytes=0"}); err == nil || strings.Contains(err.Error(), "raft") {
		t.Errorf("0: %v", err)
	}
}
