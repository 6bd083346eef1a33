module github.com/sluicemq/sluice/tools

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/sluicemq/sluice/index v0.0.0
	github.com/sluicemq/sluice/segment v0.0.0
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kadm v1.20.0
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
)

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
)

replace (
	github.com/sluicemq/sluice/index => ../index
	github.com/sluicemq/sluice/segment => ../segment
)
