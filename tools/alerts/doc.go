// Package alerts holds Sluice's Prometheus alerting rules
// (sluice.rules.yml) and their unit tests in promtool's format
// (sluice.rules_test.yml). The package has no code: its test runs the
// unit tests through Prometheus's own rule parser and evaluator, as
// `promtool test rules` does, so they run where promtool is not
// installed.
package alerts
