module github.com/sluicemq/sluice/segment

go 1.26.0

require (
	github.com/cockroachdb/datadriven v1.0.3
	github.com/klauspost/compress v1.20.4
	github.com/pierrec/lz4/v4 v4.1.33
	github.com/sluicemq/sluice/index v0.0.0
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
)

require github.com/pmezard/go-difflib v1.0.0 // indirect

replace github.com/sluicemq/sluice/index => ../index
