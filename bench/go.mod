module github.com/sluicemq/sluice/bench

go 1.26
