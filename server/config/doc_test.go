package config

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/replica"
)

var updateDocs = flag.Bool("update", false, "TestDocKeyTables: rewrite the documented defaults, synonyms and broker keys from the code")

// docRow matches a row of a key table: | `key` (`synonym`) | default | meaning |.
var docRow = regexp.MustCompile("^\\| (`[^|]+) \\| ([^|]+) \\| (.*) \\|$")

// docNames returns the backquoted names of a table cell, in order.
func docNames(cell string) []string {
	var out []string
	for i, part := range strings.Split(cell, "`") {
		if i%2 == 1 {
			out = append(out, part)
		}
	}
	return out
}

// docCell formats a value as the tables show it: backquoted, "(none)" if
// empty.
func docCell(v string) string {
	if v == "" {
		return "(none)"
	}
	return "`" + v + "`"
}

// docKeyCell formats a key and its synonyms.
func docKeyCell(key string, synonyms []string) string {
	cell := "`" + key + "`"
	if len(synonyms) > 0 {
		cell += " (`" + strings.Join(synonyms, "`, `") + "`)"
	}
	return cell
}

// docTable is the rows between the <!-- NAME: ... --> and
// <!-- NAME: end --> markers of a file, by line index.
type docTable struct {
	path  string
	lines []string
	rows  map[int][]string // line index: key cell, second cell, meaning
}

func readDocTable(t *testing.T, path, name string) *docTable {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := &docTable{path: path, lines: strings.Split(string(b), "\n"), rows: map[int][]string{}}
	begin, end := -1, -1
	for i, l := range d.lines {
		switch {
		case strings.HasPrefix(l, "<!-- "+name+": end -->"):
			end = i
		case strings.HasPrefix(l, "<!-- "+name+":") && begin < 0:
			begin = i
		}
	}
	if begin < 0 || end < begin {
		t.Fatalf("%s: no <!-- %s: ... --> ... <!-- %s: end --> markers around its table", path, name, name)
	}
	for i := begin + 1; i < end; i++ {
		if m := docRow.FindStringSubmatch(d.lines[i]); m != nil {
			d.rows[i] = m[1:]
		}
	}
	if len(d.rows) == 0 {
		t.Fatalf("%s: no rows between the %s markers", path, name)
	}
	return d
}

// set rewrites row i's first two cells.
func (d *docTable) set(i int, first, second string) {
	r := d.rows[i]
	r[0], r[1] = first, second
	d.lines[i] = fmt.Sprintf("| %s | %s | %s |", r[0], r[1], r[2])
}

func (d *docTable) write(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(d.path, []byte(strings.Join(d.lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDocKeyTables keeps the documentation's key tables true to the code:
// docs/configuration.md lists every broker key of Keys with its synonyms
// and default, and every topic config of replica.TopicConfigKeys with
// its broker key; the README's table of the main keys names real keys
// with their defaults. With -update it rewrites the defaults, synonyms
// and broker keys from the code (a key missing from the docs is still
// an error: it needs its meaning written).
func TestDocKeyTables(t *testing.T) {
	root := filepath.Join("..", "..")
	d := Default()
	checkBroker := func(tab *docTable, complete bool) {
		seen := map[string]bool{}
		for _, i := range slices.Sorted(maps.Keys(tab.rows)) {
			r := tab.rows[i]
			names := docNames(r[0])
			key := names[0]
			where := fmt.Sprintf("%s:%d: %s", tab.path, i+1, key)
			if seen[key] {
				t.Errorf("%s: listed twice", where)
			}
			seen[key] = true
			want, ok := d.String(key)
			if !ok {
				t.Errorf("%s: not a key of keyTable (a synonym, or gone?)", where)
				continue
			}
			wantKey, wantDefault := docKeyCell(key, Synonyms(key)), docCell(want)
			if *updateDocs {
				tab.set(i, wantKey, wantDefault)
				continue
			}
			if r[0] != wantKey {
				t.Errorf("%s: key cell %s, want %s (its synonyms)", where, r[0], wantKey)
			}
			if strings.TrimSpace(r[1]) != wantDefault {
				t.Errorf("%s: default %s, the code's is %s", where, r[1], wantDefault)
			}
			if strings.TrimSpace(r[2]) == "" {
				t.Errorf("%s: no meaning", where)
			}
		}
		if !complete {
			return
		}
		for _, k := range Keys() {
			if !seen[k] {
				v, _ := d.String(k)
				t.Errorf("%s: key %s is not documented; add a row: | %s | %s | what it does |", tab.path, k, docKeyCell(k, Synonyms(k)), docCell(v))
			}
		}
	}

	conf := readDocTable(t, filepath.Join(root, "docs", "configuration.md"), "broker-keys")
	checkBroker(conf, true)
	readme := readDocTable(t, filepath.Join(root, "README.md"), "main-keys")
	checkBroker(readme, false)

	// Topic configs: the name and the broker key it defaults from.
	topics := readDocTable(t, filepath.Join(root, "docs", "configuration.md"), "topic-configs")
	byName := map[string]replica.TopicConfigKey{}
	for _, k := range replica.TopicConfigKeys() {
		byName[k.Name] = k
	}
	seen := map[string]bool{}
	for i, r := range topics.rows {
		name := docNames(r[0])[0]
		where := fmt.Sprintf("%s:%d: %s", topics.path, i+1, name)
		if seen[name] {
			t.Errorf("%s: listed twice", where)
		}
		seen[name] = true
		k, ok := byName[name]
		if !ok {
			t.Errorf("%s: not a topic config of replica.TopicConfigKeys", where)
			continue
		}
		want := docCell(k.BrokerKey)
		if *updateDocs {
			topics.set(i, "`"+name+"`", want)
			continue
		}
		if strings.TrimSpace(r[1]) != want {
			t.Errorf("%s: broker key %s, the code's is %s", where, r[1], want)
		}
	}
	for name, k := range byName {
		if !seen[name] {
			t.Errorf("%s: topic config %s is not documented; add a row: | `%s` | %s | what it does |", topics.path, name, name, docCell(k.BrokerKey))
		}
	}

	if *updateDocs {
		// conf and topics hold the same file: apply the topic rows to
		// conf's lines before writing it.
		for i := range topics.rows {
			conf.lines[i] = topics.lines[i]
		}
		conf.write(t)
		readme.write(t)
	}
}
