module github.com/sluicemq/sluice/replica

go 1.26
