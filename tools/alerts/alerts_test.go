package alerts

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"go.yaml.in/yaml/v2"
)

// The unit-test file's format: promtool's (cmd/promtool/unittest.go),
// the parts these tests use. Unknown fields are errors, as in promtool.
type unitTestFile struct {
	RuleFiles          []string       `yaml:"rule_files"`
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	Tests              []testGroup    `yaml:"tests"`
}

type testGroup struct {
	Interval       model.Duration  `yaml:"interval"`
	InputSeries    []series        `yaml:"input_series"`
	AlertRuleTests []alertTestCase `yaml:"alert_rule_test"`
}

type series struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type alertTestCase struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []alert        `yaml:"exp_alerts"`
}

type alert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

const (
	rulesFile = "sluice.rules.yml"
	testsFile = "sluice.rules_test.yml"
)

// The alerts the issue asks for, each tested in sluice.rules_test.yml.
var wantAlerts = []string{"SluiceBrokerDown", "SluiceUnderReplicatedPartitions", "SluiceOfflinePartitions",
	"SluiceUnderMinIsrPartitions", "SluiceConsumerLagGrowing"}

// TestAlertRulesParse checks the rule file as Prometheus loads it: YAML,
// PromQL expressions, templates; every wanted alert is there and reads
// only Sluice metrics.
func TestAlertRulesParse(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	rgs, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var names []string
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			names = append(names, r.Alert)
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			for _, sel := range parser.ExtractSelectors(expr) {
				for _, m := range sel {
					if m.Name == model.MetricNameLabel && !strings.HasPrefix(m.Value, "sluice_") {
						t.Errorf("%s reads %s, not a Sluice metric", r.Alert, m.Value)
					}
				}
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: needs a severity label and a summary", r.Alert)
			}
		}
	}
	for _, w := range wantAlerts {
		if !slices.Contains(names, w) {
			t.Errorf("no alert %s in %s", w, rulesFile)
		}
	}
}

// TestAlertRules runs sluice.rules_test.yml as promtool test rules does:
// the input series are loaded, every rule group is evaluated at each
// evaluation interval, and at each eval_time the firing alerts of the
// named rule must be exactly those expected (labels with alertname, and
// annotations).
func TestAlertRules(t *testing.T) {
	b, err := os.ReadFile(testsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f unitTestFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatal(err)
	}
	if f.EvaluationInterval == 0 {
		f.EvaluationInterval = model.Duration(time.Minute)
	}
	tested := map[string]bool{}
	for i, tg := range f.Tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			for _, at := range tg.AlertRuleTests {
				tested[at.Alertname] = tested[at.Alertname] || len(at.ExpAlerts) > 0
			}
			runGroup(t, f, tg)
		})
	}
	for _, w := range wantAlerts {
		if !tested[w] {
			t.Errorf("%s is never shown firing in %s", w, testsFile)
		}
	}
}

func runGroup(t *testing.T, f unitTestFile, tg testGroup) {
	if tg.Interval == 0 {
		tg.Interval = model.Duration(time.Minute)
	}
	var load strings.Builder
	fmt.Fprintf(&load, "load %v\n", tg.Interval)
	for _, s := range tg.InputSeries {
		fmt.Fprintf(&load, "  %s %s\n", s.Series, s.Values)
	}
	p := parser.NewParser(parser.Options{})
	suite, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true})
	if err != nil {
		t.Fatal(err)
	}
	defer suite.Close()
	suite.SubqueryInterval = time.Duration(f.EvaluationInterval)
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:  rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		Appendable: suite.Storage(),
		Context:    context.Background(),
		NotifyFunc: func(context.Context, string, ...*rules.Alert) {},
		Logger:     slog.New(slog.DiscardHandler),
		Parser:     p,
	})
	var files []string
	for _, rf := range f.RuleFiles {
		files = append(files, filepath.Join(filepath.Dir(testsFile), rf))
	}
	groups, errs := m.LoadGroups(time.Duration(f.EvaluationInterval), labels.EmptyLabels(), "", nil, false, files...)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true)
			}
		}
	}
	cases := map[time.Duration][]alertTestCase{}
	var maxt time.Duration
	for _, at := range tg.AlertRuleTests {
		cases[time.Duration(at.EvalTime)] = append(cases[time.Duration(at.EvalTime)], at)
		maxt = max(maxt, time.Duration(at.EvalTime))
	}
	start := time.Unix(0, 0).UTC()
	step := time.Duration(f.EvaluationInterval)
	for off := time.Duration(0); off <= maxt; off += step {
		ts := start.Add(off)
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range groups {
				g.Eval(suite.Context(), ts)
				for _, r := range g.Rules() {
					if err := r.LastError(); err != nil {
						t.Fatalf("rule %s at %v: %v", r.Name(), off, err)
					}
				}
			}
		})
		// As promtool: an eval_time in [off, off+step) is checked
		// against this evaluation.
		for at, tcs := range cases {
			if at < off || at >= off+step {
				continue
			}
			for _, tc := range tcs {
				got := firing(groups, tc.Alertname)
				var want []string
				for _, a := range tc.ExpAlerts {
					lbls := map[string]string{labels.AlertName: tc.Alertname}
					for k, v := range a.ExpLabels {
						lbls[k] = v
					}
					want = append(want, labels.FromMap(lbls).String()+" "+labels.FromMap(a.ExpAnnotations).String())
				}
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("%s at %v:\n  firing   %q\n  expected %q", tc.Alertname, at, got, want)
				}
			}
		}
	}
}

// firing are the firing alerts of the rule named name, as "labels
// annotations", sorted.
func firing(groups map[string]*rules.Group, name string) []string {
	var out []string
	for _, g := range groups {
		for _, r := range g.Rules() {
			ar, ok := r.(*rules.AlertingRule)
			if !ok || ar.Name() != name {
				continue
			}
			for _, a := range ar.ActiveAlerts() {
				if a.State == rules.StateFiring {
					out = append(out, a.Labels.String()+" "+a.Annotations.String())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
