package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// This file is the message browser: up to maxBrowseRecords records of one
// partition from an offset, or from the first offset whose timestamp is at
// or after a time (ListOffsets with a timestamp, KIP-79), read with a
// direct consumer (kgo.ConsumePartitions, no group) bounded by browseWait.

// bytesJSON is a key, value or header value as the page may show it: text
// when it is valid UTF-8, JSON pretty-printed when it parses as JSON, and
// always a hex dump. Only the first maxShownBytes bytes are shown.
type bytesJSON struct {
	Null      bool    `json:"null"`
	Size      int     `json:"size"` // bytes
	Truncated bool    `json:"truncated"`
	Text      *string `json:"text"` // nil: not UTF-8
	JSON      *string `json:"json"` // nil: not JSON, or too deep to pretty-print (maxIndentBytes)
	Hex       string  `json:"hex"`  // hex dump (offset, bytes, ASCII)
}

func render(b []byte) bytesJSON {
	out := bytesJSON{Null: b == nil, Size: len(b)}
	shown := b
	if len(shown) > maxShownBytes {
		shown, out.Truncated = shown[:maxShownBytes], true
	}
	if utf8.Valid(b) {
		s := string(shown)
		for !utf8.ValidString(s) { // a cut rune at the end
			s = s[:len(s)-1]
		}
		out.Text = &s
	}
	if len(b) > 0 && len(b) <= 1<<20 && json.Valid(b) && indentedSize(b) <= maxIndentBytes {
		var buf bytes.Buffer
		if json.Indent(&buf, b, "", "  ") == nil {
			s := buf.String()
			if len(s) > 2*maxShownBytes {
				s, out.Truncated = s[:2*maxShownBytes], true
				for !utf8.ValidString(s) {
					s = s[:len(s)-1]
				}
			}
			out.JSON = &s
		}
	}
	out.Hex = hex.Dump(shown)
	return out
}

// maxIndentBytes bounds what json.Indent may write for one value: it
// writes every line's indentation in full, so a small, deeply nested value
// ("[[[...]]]", 20 KB at encoding/json's depth limit of 10,000) would
// pretty-print to 200 MB. Such a value is shown as text and hex only.
const maxIndentBytes = 4 << 20

// indentedSize is an upper bound, in bytes, of json.Indent's output for
// the valid JSON b with a two-space indent: b, a space after every colon,
// and a newline and the deepest indentation after every bracket, brace or
// comma outside strings.
func indentedSize(b []byte) int {
	var depth, deepest, colons, breaks int
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
			breaks++
		case c == ']' || c == '}':
			depth--
			breaks++
		case c == ',':
			breaks++
		case c == ':':
			colons++
		}
	}
	return len(b) + colons + breaks*(1+2*deepest)
}

type headerJSON struct {
	Key   string    `json:"key"`
	Value bytesJSON `json:"value"`
}

type recordJSON struct {
	Offset      int64        `json:"offset"`
	Timestamp   int64        `json:"timestamp"` // ms since the epoch
	LeaderEpoch int32        `json:"leaderEpoch"`
	Key         bytesJSON    `json:"key"`
	Value       bytesJSON    `json:"value"`
	Headers     []headerJSON `json:"headers"`
}

type messagesJSON struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	StartOffset int64        `json:"startOffset"` // log start offset
	EndOffset   int64        `json:"endOffset"`   // high watermark
	From        int64        `json:"from"`        // the first offset read
	Records     []recordJSON `json:"records"`
	More        bool         `json:"more"` // records after the last one exist
	Note        string       `json:"note,omitempty"`
}

// parseTime accepts milliseconds since the epoch or RFC 3339.
func parseTime(s string) (int64, bool) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, true
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), true
		}
	}
	return 0, false
}

func (c *Console) messages(ctx context.Context, topic string, q url.Values) (any, error) {
	p64, err := strconv.ParseInt(q.Get("partition"), 10, 32)
	if err != nil || p64 < 0 {
		return nil, badRequest("partition must be a partition number")
	}
	part := int32(p64)
	limit := defBrowseRecords
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxBrowseRecords {
			return nil, badRequest("limit must be 1 to %d", maxBrowseRecords)
		}
		limit = n
	}
	_, t, err := c.topicMetadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	found := false
	for _, p := range t.Partitions {
		found = found || p.Partition == part
	}
	if !found {
		return nil, notFound("topic %q has no partition %d", topic, part)
	}
	adm, err := c.admin(ctx)
	if err != nil {
		return nil, err
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil && len(starts) == 0 {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil && len(ends) == 0 {
		return nil, err
	}
	out := messagesJSON{Topic: topic, Partition: part, Records: []recordJSON{},
		StartOffset: offsetOf(starts, topic, part), EndOffset: offsetOf(ends, topic, part)}
	if out.StartOffset < 0 || out.EndOffset < 0 {
		return nil, &apiError{502, fmt.Sprintf("the offsets of %s-%d are unknown (no leader?)", topic, part)}
	}
	switch {
	case q.Get("offset") != "":
		off, err := strconv.ParseInt(q.Get("offset"), 10, 64)
		if err != nil {
			return nil, badRequest("offset must be an integer")
		}
		if off < 0 { // from the end: -N is the last N records
			off = out.EndOffset + off
		}
		out.From = off
	case q.Get("timestamp") != "":
		ms, ok := parseTime(q.Get("timestamp"))
		if !ok || ms < 0 { // ListOffsets reads a negative timestamp as -1 latest, -2 earliest, ...
			return nil, badRequest("timestamp must be milliseconds since the epoch or RFC 3339")
		}
		l, err := adm.ListOffsetsAfterMilli(ctx, ms, topic)
		if err != nil && len(l) == 0 {
			return nil, err
		}
		lo, ok := l.Lookup(topic, part)
		switch {
		case !ok || lo.Err != nil:
			return nil, &apiError{502, fmt.Sprintf("ListOffsets for a timestamp of %s-%d failed", topic, part)}
		case lo.Offset < 0 || lo.Offset >= out.EndOffset:
			// Kafka answers -1 when no record is at or after the time;
			// kadm then lists the end offset instead.
			out.From, out.Note = out.EndOffset, "no record at or after that time"
		default:
			out.From = lo.Offset
		}
	default:
		out.From = out.EndOffset - int64(limit)
	}
	out.From = min(max(out.From, out.StartOffset), out.EndOffset)
	if out.From >= out.EndOffset {
		return out, nil
	}
	select {
	case c.browse <- struct{}{}:
		defer func() { <-c.browse }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.cfg.Bootstrap...),
		kgo.ClientID("sluice-console-browser"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().At(out.From)}}),
		kgo.FetchMaxBytes(maxBrowseFetch),
		kgo.FetchMaxPartitionBytes(maxBrowseFetch),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, c.dialOpts(userFrom(ctx))...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, browseWait)
	defer cancel()
	last := out.From - 1
	for len(out.Records) < limit && last < out.EndOffset-1 {
		fs := cl.PollRecords(pctx, limit-len(out.Records))
		if pctx.Err() != nil {
			if len(out.Records) == 0 {
				out.Note = "no records arrived within " + browseWait.String()
			}
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			if len(out.Records) >= limit || r.Offset >= out.EndOffset {
				return
			}
			rj := recordJSON{Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), LeaderEpoch: r.LeaderEpoch,
				Key: render(r.Key), Value: render(r.Value), Headers: []headerJSON{}}
			for _, h := range r.Headers {
				rj.Headers = append(rj.Headers, headerJSON{h.Key, render(h.Value)})
			}
			out.Records = append(out.Records, rj)
			last = r.Offset
		})
	}
	out.More = last < out.EndOffset-1
	return out, nil
}
