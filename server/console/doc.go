// Package console is Sluice's web console: a read-only view of a Kafka
// cluster (brokers, controller, topics, partitions, messages, consumer
// groups, throughput, alerts), served by the broker at /ui on its metrics
// listener and embedded in the binary (embed.FS: plain HTML, CSS and
// JavaScript, no build step).
//
// It reads the cluster through Kafka's own APIs (franz-go kgo/kadm
// against Config.Bootstrap), so it shows what any client would see and
// would work against any Kafka; Config.Alerts adds what only the broker
// knows.
//
// # Files
//
//   - console.go: Console (the http.Handler), Config, routing, the
//     read-only rule (GET and HEAD only, 405 otherwise), security headers,
//     JSON errors, the static files.
//   - cluster.go: the overview, topic list and topic pages (Metadata,
//     ListOffsets, DescribeLogDirs, DescribeConfigs) and the alerts
//     derived from Metadata.
//   - groups.go: consumer groups (ListGroups, DescribeGroups or
//     ConsumerGroupDescribe for KIP-848 groups, OffsetFetch) and their lag.
//   - messages.go: the message browser and how bytes are rendered (text,
//     pretty-printed JSON, hex dump).
//   - sampler.go: the throughput sampler behind the charts: produced from
//     log end offsets, consumed from Config.Fetched (the records the
//     broker's Fetch responses sent) or, without it, from the groups'
//     committed offsets.
//   - user.go: User (whom the Kafka requests authenticate as) and the
//     per-user clients.
//   - page.go: the page's first paint: static/index.html is an
//     html/template filled with the overview and the topic list, so that
//     `curl /ui/` (or a browser without JavaScript) shows the brokers,
//     up or down, the controller and the topics; console.js replaces it.
//   - static/: index.html, console.css, console.js — a single page with
//     hash routes (#/overview, #/topics, #/topics/NAME,
//     #/topics/NAME/messages?partition=P&offset=O|timestamp=T&view=V,
//     #/groups, #/groups/ID) that renders with textContent only, never
//     innerHTML, so no record or name can inject markup.
//
// # JSON API
//
// Every route is a GET under /ui/api/ and answers application/json; a
// failure is {"error": "..."} with 400 (bad parameter), 404 (no such
// topic, partition or group), 502 (the cluster did not answer) or 503
// (closed):
//
//	overview                     brokers, controller, counts, health, alerts
//	alerts                       the banner: Config.Alerts + derived alerts
//	topics                       every topic: partitions, replication, records, bytes
//	topics/NAME                  partitions (leader, leader epoch, replicas, ISR,
//	                             offline and down replicas, log start, high
//	                             watermark, bytes) and configs not at their default
//	topics/NAME/messages         ?partition=P [&offset=O | &timestamp=ms|RFC3339]
//	                             [&limit=1..100]: records from O (O<0: the last
//	                             -O), from the first record at or after the time,
//	                             or the last limit (default 50)
//	groups                       every group: type, state, members, lag
//	groups/ID                    members with assignments, committed offsets, lag
//	rates                        per-topic produce and consume records/s per
//	                             sample interval, and "now": the average
//	                             over NowWindow (at least 10 s)
//
// # Bounds
//
// A request's URL is at most maxURLBytes; the message browser reads at
// most maxBrowseRecords records, fetches at most maxBrowseFetch bytes,
// waits at most browseWait, and serves maxConcurrentBrowse requests at
// once; each key, value and header shows at most maxShownBytes bytes; a
// request's Kafka calls are bounded by Config.RequestTimeout.
//
// # Goroutines and locks
//
// Requests run on the caller's goroutines and share one kgo client per
// User (user.go: the HTTP user the broker authenticated, carried in the
// request's context, WithUser; the zero User when the console is open),
// created on that user's first request under Console.mu, at most
// maxUserClients (the least recently used is closed), all closed by
// Close. The sampler reads as the User of the latest request.
// The message browser makes a direct consumer client per request (no
// group), closed before the request returns. One sampler goroutine,
// started by the first API request, samples every Config.SampleInterval
// and exits after idleStopAfter without a request (so an idle broker does
// no work) or when Close cancels it; Close waits for it. Opening the page
// (its first paint) starts it too. sampler.mu
// guards the samples and the goroutine's running state; no lock is held
// during a Kafka request, and the two mutexes are never held together.
package console
