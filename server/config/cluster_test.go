package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const threeVoters = "controller.quorum.voters=1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194"

// node is the --set flags of node n (1..3) of a local three-node cluster
// of combined brokers and controllers, as tools/cluster.sh starts them,
// plus extra.
func node(n int, extra ...string) []string {
	return append([]string{
		fmt.Sprintf("node.id=%d", n),
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", 9091+n, 9191+n),
		threeVoters,
		fmt.Sprintf("log.dirs=./cluster-data/node%d", n),
	}, extra...)
}

// A single node is a one-voter cluster: its quorum synthesized (node.id at
// its inter-broker listener, not shown as set), combined roles, no
// controller listener, the same listeners advertised.
func TestSingleNodeDefaults(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.SoloQuorum() || !c.IsBroker() || !c.IsController() || c.ProcessRoles != RoleBroker|RoleController {
		t.Errorf("roles %v solo %v", c.ProcessRoles, c.SoloQuorum())
	}
	if want := []Voter{{ID: 1, Host: "127.0.0.1", Port: 9092}}; !reflect.DeepEqual(c.QuorumVoters, want) {
		t.Errorf("voters %v, want %v", c.QuorumVoters, want)
	}
	if l, ok := c.ControllerListener(); ok {
		t.Errorf("controller listener %v", l)
	}
	if l, ok := c.InterBrokerListener(); !ok || l.String() != "PLAINTEXT://127.0.0.1:9092" {
		t.Errorf("inter-broker listener %v %v", l, ok)
	}
	if got := formatListeners(c.AdvertisedListeners); got != "PLAINTEXT://127.0.0.1:9092" {
		t.Errorf("advertised %s", got)
	}
	want := map[string]string{
		"process.roles":                       "broker,controller",
		"controller.listener.names":           "CONTROLLER",
		"inter.broker.listener.name":          "PLAINTEXT",
		"controller.quorum.voters":            "",
		"controller.quorum.bootstrap.servers": "",
		"listener.security.protocol.map":      "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
		"broker.heartbeat.interval.ms":        "2000",
		"broker.session.timeout.ms":           "9000",
		"broker.rack":                         "",
		"replica.lag.time.max.ms":             "30000",
		"metadata.log.segment.bytes":          "8388608",
		"metadata.max.retention.bytes":        "104857600",
		"offsets.topic.replication.factor":    "3",
		"socket.request.max.bytes":            "104857600",
		"node.id":                             "1",
	}
	for k, v := range want {
		if got, ok := c.String(k); !ok || got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
		if src, _ := c.Source(k); src != SourceDefault {
			t.Errorf("%s: source %v", k, src)
		}
	}
	if c.ReplicaLagTime().Milliseconds() != 30000 {
		t.Errorf("ReplicaLagTime %v", c.ReplicaLagTime())
	}
	// node.id 0 is not: it is the lone voter's raft id, and raft
	// reserves 0.
	if _, err := Load("", []string{"node.id=0", "process.roles=controller,broker"}); err == nil || !strings.Contains(err.Error(), "one-voter") {
		t.Errorf("node.id=0: %v", err)
	}
	if c, err := Load("", []string{"node.id=7"}); err != nil || c.QuorumVoters[0].ID != 7 {
		t.Errorf("node.id=7: %v %v", c.QuorumVoters, err)
	}
}

func TestThreeNodeCombined(t *testing.T) {
	for n := 1; n <= 3; n++ {
		c, err := Load("", node(n))
		if err != nil {
			t.Fatalf("node %d: %v", n, err)
		}
		if c.SoloQuorum() || !c.IsBroker() || !c.IsController() {
			t.Errorf("node %d: solo %v roles %v", n, c.SoloQuorum(), c.ProcessRoles)
		}
		cl, ok := c.ControllerListener()
		if want := fmt.Sprintf("CONTROLLER://127.0.0.1:%d", 9191+n); !ok || cl.String() != want {
			t.Errorf("node %d: controller listener %v %v, want %s", n, cl, ok, want)
		}
		if got, want := formatListeners(c.AdvertisedListeners), fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", 9091+n); got != want {
			t.Errorf("node %d: advertised %s, want %s", n, got, want)
		}
		if l, ok := c.InterBrokerListener(); !ok || l.Name != "PLAINTEXT" {
			t.Errorf("node %d: inter-broker %v %v", n, l, ok)
		}
		want := []Voter{{1, "127.0.0.1", 9192}, {2, "127.0.0.1", 9193}, {3, "127.0.0.1", 9194}}
		if !reflect.DeepEqual(c.QuorumVoters, want) {
			t.Errorf("voters %+v", c.QuorumVoters)
		}
		if c.QuorumVoters[n-1].Addr() != cl.Addr() {
			t.Errorf("node %d: voter address %s, controller listener %s", n, c.QuorumVoters[n-1].Addr(), cl.Addr())
		}
	}
}

func TestVoterSyntax(t *testing.T) {
	c, err := Load("", []string{"controller.quorum.voters= 1@[::1]:9093 ,2@broker-2.example.com:9093, 3@10.0.0.3:1",
		"listeners=PLAINTEXT://[::1]:9092,CONTROLLER://[::1]:9093"})
	if err != nil {
		t.Fatal(err)
	}
	if v := c.QuorumVoters[0]; v.Host != "::1" || v.Port != 9093 || v.Addr() != "[::1]:9093" || v.String() != "1@[::1]:9093" {
		t.Errorf("voter %+v %s", v, v.Addr())
	}
	if got, _ := c.String("controller.quorum.voters"); got != "1@[::1]:9093,2@broker-2.example.com:9093,3@10.0.0.3:1" {
		t.Errorf("String %q", got)
	}
	for _, tc := range []struct{ v, want string }{
		{"1localhost:9093", "each entry should be in the form `{id}@{host}:{port}`"},
		{"1@a@b:1", "each entry should be in the form"},
		{"x@h:1", `failed to parse voter ID as an integer from "x"`},
		{"1@h", "want host:port"},
		{"1@:9093", "no host"},
		{"1@0.0.0.0:9093", "host 0.0.0.0 is not routable"},
		{"1@h!:1", `bad host "h!"`},
		{"1@h:0", `port "0" must be in [1, 65535]`},
		{"1@h:65536", `port "65536" must be in [1, 65535]`},
		{"1@h:1,", "empty element"},
	} {
		c := Default()
		err := c.Set("controller.quorum.voters", tc.v)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.v, err, tc.want)
		}
	}
}

func TestProcessRoles(t *testing.T) {
	for v, want := range map[string]ProcessRoles{
		"broker":                 RoleBroker,
		"controller":             RoleController,
		"broker,controller":      RoleBroker | RoleController,
		"controller,broker":      RoleBroker | RoleController,
		" controller , broker  ": RoleBroker | RoleController,
	} {
		c := Default()
		if err := c.Set("process.roles", v); err != nil || c.ProcessRoles != want {
			t.Errorf("%q: %v %v", v, c.ProcessRoles, err)
		}
	}
	for v, msg := range map[string]string{
		"":                   "must be broker, controller or broker,controller",
		"broker,broker":      "duplicate role names found in process.roles: broker,broker",
		"Broker":             "unknown process role 'Broker' (only 'broker' and 'controller' are allowed roles)",
		"zookeeper":          "unknown process role 'zookeeper'",
		"broker,,controller": "empty element",
	} {
		c := Default()
		if err := c.Set("process.roles", v); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want %q", v, err, msg)
		}
	}
	c := Default()
	c.Set("process.roles", "controller,broker")
	if s, _ := c.String("process.roles"); s != "broker,controller" {
		t.Errorf("String %q", s)
	}
}

// Every rule between the KRaft keys, each refused with the key it names.
func TestClusterValidation(t *testing.T) {
	brokerOnly := func(extra ...string) []string {
		return append([]string{"process.roles=broker", "node.id=4", "listeners=PLAINTEXT://127.0.0.1:9095", threeVoters}, extra...)
	}
	controllerOnly := func(extra ...string) []string {
		return append([]string{"process.roles=controller", "node.id=1", "listeners=CONTROLLER://127.0.0.1:9192", threeVoters}, extra...)
	}
	for _, tc := range []struct {
		name    string
		sets    []string
		key     string
		wantErr string
	}{
		{"broker-only without voters", []string{"process.roles=broker"}, "process.roles", "process.roles=broker needs controller.quorum.voters"},
		{"controller-only without voters", []string{"process.roles=controller"}, "process.roles", "process.roles=controller needs controller.quorum.voters"},
		{"bootstrap servers without this controller", []string{"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9193", "controller.quorum.bootstrap.servers=127.0.0.1:9192"}, "controller.quorum.bootstrap.servers", "does not list this controller's own endpoint (its controller listener in advertised.listeners or listeners): a controller joining a running quorum (KIP-853's add-controller) is not supported"},
		{"bootstrap servers out of node.id order", []string{"node.id=1", "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9193", "controller.quorum.bootstrap.servers=127.0.0.1:9192,127.0.0.1:9193,127.0.0.1:9194"}, "controller.quorum.bootstrap.servers", "lists this controller's endpoint 127.0.0.1:9193 at position 2, and Sluice numbers the bootstrap controllers 1, 2, 3, ... in the order listed (it cannot ask them their ids), so node.id must be 2, not 1"},
		{"two bootstrap servers", []string{"node.id=1", "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192", "controller.quorum.bootstrap.servers=127.0.0.1:9192,127.0.0.1:9193"}, "controller.quorum.bootstrap.servers", "names 2 voters; want 1, 3 or 5"},
		{"controller listener without voters", []string{"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}, "listeners", "CONTROLLER://127.0.0.1:9093 is a controller listener (controller.listener.names=CONTROLLER), which only a member of a controller quorum has"},
		{"a renamed controller listener without voters", []string{"controller.listener.names=PLAINTEXT"}, "listeners", "PLAINTEXT://127.0.0.1:9092 is a controller listener"},
		{"two voters", node(1, "controller.quorum.voters=1@127.0.0.1:9192,2@127.0.0.1:9193"), "controller.quorum.voters", "names 2 voters; want 1, 3 or 5: a raft quorum is a majority, so 2 voters tolerate 0 failed, no more than 1 do"},
		{"four voters", node(1, "controller.quorum.voters=1@h:1,2@h:2,3@h:3,4@h:4"), "controller.quorum.voters", "4 voters tolerate 1 failed, no more than 3 do"},
		{"seven voters", node(1, "controller.quorum.voters=1@h:1,2@h:2,3@h:3,4@h:4,5@h:5,6@h:6,7@h:7"), "controller.quorum.voters", "names 7 voters; want 1, 3 or 5: every metadata change waits for a majority"},
		{"duplicate voter ids", node(1, "controller.quorum.voters=1@h:1,1@h:2,3@h:3"), "controller.quorum.voters", "voter id 1 is given twice"},
		{"voter id 0", node(1, "controller.quorum.voters=0@h:1,1@h:2,3@h:3"), "controller.quorum.voters", "voter id 0 must be >= 1 (raft reserves 0)"},
		{"node.id 0 with voters", node(1, "node.id=0"), "node.id", "must be >= 1 when controller.quorum.voters is set: it is this node's raft id, and raft reserves 0"},
		{"controller not among voters", node(1, "controller.quorum.voters=2@127.0.0.1:9193"), "controller.quorum.voters", "if process.roles contains the 'controller' role, the node id 1 must be included in the set of voters controller.quorum.voters=[2]"},
		{"controller without a controller listener", node(1, "listeners=PLAINTEXT://127.0.0.1:9092"), "listeners", "controller.listener.names must contain at least one value appearing in the 'listeners' configuration when running the KRaft controller role"},
		{"controller missing one controller listener", node(1, "controller.listener.names=CONTROLLER,RAFT"), "controller.listener.names", "must only contain values appearing in the 'listeners' configuration when running the KRaft controller role; RAFT is not a listener"},
		{"no controller listener names", node(1, "controller.listener.names="), "controller.listener.names", "must name at least one listener when controller.quorum.voters is set"},
		{"duplicate controller listener names", node(1, "controller.listener.names=CONTROLLER,controller"), "controller.listener.names", "listener name CONTROLLER is given twice"},
		{"broker-only among voters", brokerOnly("node.id=3"), "controller.quorum.voters", "if process.roles contains just the 'broker' role, the node id 3 must not be included in the set of voters controller.quorum.voters=[1 2 3]"},
		{"broker-only with a controller listener", brokerOnly("listeners=PLAINTEXT://127.0.0.1:9095,CONTROLLER://127.0.0.1:9195"), "listeners", "controller.listener.names must not contain a value appearing in the 'listeners' configuration when running KRaft with just the broker role"},
		{"controller-only with a broker listener", controllerOnly("listeners=CONTROLLER://127.0.0.1:9192,PLAINTEXT://127.0.0.1:9092"), "listeners", "the listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller; PLAINTEXT://127.0.0.1:9092 is not one"},
		{"controller-only advertising a broker listener", controllerOnly("advertised.listeners=PLAINTEXT://127.0.0.1:9092"), "advertised.listeners", "the advertised.listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller"},
		{"broker-only advertising a controller listener", brokerOnly("advertised.listeners=PLAINTEXT://127.0.0.1:9095,CONTROLLER://127.0.0.1:9192"), "advertised.listeners", "the advertised.listeners config must not contain KRaft controller listeners from controller.listener.names when process.roles contains just the broker role"},
		{"every listener a controller listener", node(1, "listeners=CONTROLLER://127.0.0.1:9192"), "advertised.listeners", "there must be at least one advertised listener. Perhaps all listeners appear in controller.listener.names?"},
		{"inter-broker listener is the controller listener", node(1, "inter.broker.listener.name=CONTROLLER"), "inter.broker.listener.name", "inter.broker.listener.name must be a listener name defined in advertised.listeners, and not a controller listener. The valid options based on currently configured listeners are PLAINTEXT"},
		{"inter-broker listener unknown", []string{"inter.broker.listener.name=internal"}, "inter.broker.listener.name", "must be a listener name defined in advertised.listeners"},
		{"inter-broker listener not one name", []string{"inter.broker.listener.name=A,B"}, "inter.broker.listener.name", `"A,B" is not one listener name`},
		{"controller name missing from an explicit map", node(1, "listener.security.protocol.map=PLAINTEXT:PLAINTEXT"), "listener.security.protocol.map", "controller listener with name CONTROLLER defined in controller.listener.names not found in listener.security.protocol.map"},
		{"bad bootstrap server", []string{"controller.quorum.bootstrap.servers=127.0.0.1"}, "controller.quorum.bootstrap.servers", `"127.0.0.1": want host:port (an IPv6 host in brackets); each entry should be in the form "{host}:{port}"`},
		{"bootstrap server port 0", []string{"controller.quorum.bootstrap.servers=h:0"}, "controller.quorum.bootstrap.servers", `port "0" must be in [1, 65535]`},
		{"session timeout at the heartbeat interval", []string{"broker.session.timeout.ms=2000"}, "broker.session.timeout.ms", "must exceed broker.heartbeat.interval.ms (2000)"},
		{"heartbeat interval 0", []string{"broker.heartbeat.interval.ms=0"}, "broker.heartbeat.interval.ms", "must be >= 1"},
		{"session timeout 0", []string{"broker.session.timeout.ms=0"}, "broker.session.timeout.ms", "must be >= 1"},
		{"replica lag 0", []string{"replica.lag.time.max.ms=0"}, "replica.lag.time.max.ms", "must be >= 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("", tc.sets)
			if err == nil {
				t.Fatalf("%q accepted", tc.sets)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v\nwant %q", err, tc.wantErr)
			}
			if keys := problems(t, err); !slices.Contains(keys, tc.key) {
				t.Errorf("keys %q lack %s (%v)", keys, tc.key, err)
			}
		})
	}
}

func TestBrokerOnlyAndControllerOnly(t *testing.T) {
	b, err := Load("", []string{"process.roles=broker", "node.id=4", "listeners=PLAINTEXT://127.0.0.1:9095", threeVoters, "broker.rack=rack-a"})
	if err != nil {
		t.Fatal(err)
	}
	if !b.IsBroker() || b.IsController() || b.SoloQuorum() || b.BrokerRack != "rack-a" {
		t.Errorf("broker: %+v", b)
	}
	if _, ok := b.ControllerListener(); ok {
		t.Error("broker-only node has a controller listener")
	}
	c, err := Load("", []string{"process.roles=controller", "node.id=2", "listeners=CONTROLLER://127.0.0.1:9193", threeVoters})
	if err != nil {
		t.Fatal(err)
	}
	if c.IsBroker() || !c.IsController() || len(c.AdvertisedListeners) != 0 || c.InterBrokerListenerName != "" {
		t.Errorf("controller: %+v", c)
	}
	if _, ok := c.InterBrokerListener(); ok {
		t.Error("controller-only node has an inter-broker listener")
	}
	if l, ok := c.ControllerListener(); !ok || l.Port != 9193 {
		t.Errorf("controller listener %v %v", l, ok)
	}
	// A single voter is a quorum too.
	if _, err := Load("", []string{"controller.quorum.voters=1@127.0.0.1:9093", "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}); err != nil {
		t.Error(err)
	}
	// Bootstrap servers are parsed and accepted alongside voters (unused).
	c, err = Load("", node(1, "controller.quorum.bootstrap.servers=127.0.0.1:9192, [::1]:9193"))
	if err != nil || !slices.Equal(c.QuorumBootstrapServers, []string{"127.0.0.1:9192", "[::1]:9193"}) {
		t.Errorf("bootstrap %q %v", c.QuorumBootstrapServers, err)
	}
}

// Controller listeners are never advertised: derived advertised.listeners
// leave them out, whatever their order or name, and a wildcard controller
// listener needs no advertised.listeners.
func TestControllerListenerNotAdvertised(t *testing.T) {
	for _, tc := range []struct {
		sets      []string
		advertise string
		ctrl      string
	}{
		{node(2), "PLAINTEXT://127.0.0.1:9093", "CONTROLLER://127.0.0.1:9193"},
		{node(1, "listeners=CONTROLLER://0.0.0.0:9192,PLAINTEXT://127.0.0.1:9092"), "PLAINTEXT://127.0.0.1:9092", "CONTROLLER://0.0.0.0:9192"},
		{node(1, "controller.listener.names=RAFT", "listeners=RAFT://127.0.0.1:9192,PLAINTEXT://:9092,INTERNAL://127.0.0.1:9292",
			"listener.security.protocol.map=RAFT:PLAINTEXT,PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT", "inter.broker.listener.name=INTERNAL"),
			"PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9292", "RAFT://127.0.0.1:9192"},
		// The derived map gives a custom controller name PLAINTEXT too.
		{node(1, "controller.listener.names=RAFT,CONTROLLER", "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9193,RAFT://127.0.0.1:9192"),
			"PLAINTEXT://127.0.0.1:9092", "CONTROLLER://127.0.0.1:9193"},
	} {
		c, err := Load("", tc.sets)
		if err != nil {
			t.Errorf("%q: %v", tc.sets, err)
			continue
		}
		l, _ := c.ControllerListener()
		if got := formatListeners(c.AdvertisedListeners); got != tc.advertise || l.String() != tc.ctrl {
			t.Errorf("%q: advertised %s controller %s; want %s and %s", tc.sets, got, l, tc.advertise, tc.ctrl)
		}
	}
	// Set in any order: advertised.listeners follows both keys.
	c := Default()
	for _, kv := range [][2]string{
		{"listeners", "PLAINTEXT://127.0.0.1:9092,RAFT://127.0.0.1:9192"},
		{"controller.listener.names", "RAFT"},
		{"controller.quorum.voters", "1@127.0.0.1:9192"},
	} {
		if err := c.Set(kv[0], kv[1]); err != nil && kv[0] != "listeners" {
			t.Fatal(err)
		}
	}
	if err := c.Validate(); err != nil || formatListeners(c.AdvertisedListeners) != "PLAINTEXT://127.0.0.1:9092" {
		t.Errorf("advertised %v: %v", c.AdvertisedListeners, err)
	}
}

func TestInterBrokerListenerName(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{nil, "PLAINTEXT"},
		{[]string{"listener.security.protocol.map=INTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT", "listeners=INTERNAL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092"}, "PLAINTEXT"},
		{[]string{"listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT", "listeners=INTERNAL://127.0.0.1:9093,EXTERNAL://127.0.0.1:9092"}, "INTERNAL"},
		{[]string{"listener.security.protocol.map=INTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT", "listeners=INTERNAL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092", "inter.broker.listener.name=internal"}, "INTERNAL"},
		{[]string{"inter.broker.listener.name="}, "PLAINTEXT"},
	} {
		c, err := Load("", tc.sets)
		if err != nil || c.InterBrokerListenerName != tc.want {
			t.Errorf("%q: %q %v, want %q", tc.sets, c.InterBrokerListenerName, err, tc.want)
		}
	}
	c := Default()
	c.Set("inter.broker.listener.name", "PLAINTEXT")
	if s, _ := c.Source("inter.broker.listener.name"); s != SourceStatic {
		t.Errorf("source %v", s)
	}
	c.Set("inter.broker.listener.name", "")
	if s, _ := c.Source("inter.broker.listener.name"); s != SourceDefault {
		t.Errorf("unset: source %v", s)
	}
}

// TestLoadKafkaStockFile: Kafka 4's shipped server.properties loads as is:
// a one-voter quorum from controller.quorum.bootstrap.servers, the
// CONTROLLER listener advertised but never told to clients, and the keys
// Sluice has no behaviour for listed by Unacted.
func TestLoadKafkaStockFile(t *testing.T) {
	c, err := Load("testdata/kafka-4.0-server.properties", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Voter{{ID: 1, Host: "localhost", Port: 9093}}; !reflect.DeepEqual(c.QuorumVoters, want) || c.SoloQuorum() {
		t.Errorf("voters %v, want %v", c.QuorumVoters, want)
	}
	if want := []Listener{{"PLAINTEXT", "localhost", 9092}}; !reflect.DeepEqual(c.AdvertisedListeners, want) {
		t.Errorf("advertised %v, want %v", c.AdvertisedListeners, want)
	}
	if s, _ := c.String("advertised.listeners"); s != "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093" {
		t.Errorf("advertised.listeners = %q", s)
	}
	want := []string{"num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir",
		"share.coordinator.state.topic.min.isr", "share.coordinator.state.topic.replication.factor",
		"socket.receive.buffer.bytes", "socket.send.buffer.bytes"}
	if got := c.Unacted(); !slices.Equal(got, want) {
		t.Errorf("Unacted = %v, want %v", got, want)
	}
	if c.NodeID != 1 || c.LogRetentionMs != 168*hourMs || c.OffsetsTopicReplicationFactor != 1 || !slices.Equal(c.LogDirs, []string{"/tmp/kraft-combined-logs"}) {
		t.Errorf("got %+v", c)
	}
}

// TestBootstrapServersCluster: three combined nodes and a broker-only one
// given the same controller.quorum.bootstrap.servers form one quorum, the
// servers numbered 1, 2, 3 in the order listed.
func TestBootstrapServersCluster(t *testing.T) {
	const servers = "controller.quorum.bootstrap.servers=127.0.0.1:9192,127.0.0.1:9193,127.0.0.1:9194"
	want := []Voter{{1, "127.0.0.1", 9192}, {2, "127.0.0.1", 9193}, {3, "127.0.0.1", 9194}}
	for id := 1; id <= 3; id++ {
		c, err := Load("", []string{fmt.Sprintf("node.id=%d", id), servers,
			fmt.Sprintf("listeners=PLAINTEXT://:%d,CONTROLLER://:%d", 9091+id, 9191+id),
			fmt.Sprintf("advertised.listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", 9091+id, 9191+id)})
		if err != nil {
			t.Fatalf("node %d: %v", id, err)
		}
		if !reflect.DeepEqual(c.QuorumVoters, want) {
			t.Errorf("node %d: voters %v", id, c.QuorumVoters)
		}
	}
	b, err := Load("", []string{"process.roles=broker", "node.id=4", "listeners=PLAINTEXT://127.0.0.1:9095", servers})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b.QuorumVoters, want) {
		t.Errorf("broker: voters %v", b.QuorumVoters)
	}
	// controller.quorum.voters, when set, is the quorum; bootstrap servers
	// are then not used.
	v, err := Load("", []string{"node.id=1", "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192", "controller.quorum.voters=1@127.0.0.1:9192", "controller.quorum.bootstrap.servers=10.0.0.1:9093"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Voter{{1, "127.0.0.1", 9192}}; !reflect.DeepEqual(v.QuorumVoters, want) {
		t.Errorf("voters %v", v.QuorumVoters)
	}
}
