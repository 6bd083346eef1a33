module github.com/sluicemq/sluice/replica

go 1.26.0

require (
	github.com/sluicemq/sluice/segment v0.0.0
	go.etcd.io/raft/v3 v3.6.0
)

require (
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/sluicemq/sluice/index v0.0.0 // indirect
	google.golang.org/protobuf v1.33.0 // indirect
)

replace (
	github.com/sluicemq/sluice/index => ../index
	github.com/sluicemq/sluice/segment => ../segment
)
