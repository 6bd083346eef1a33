module github.com/sluicemq/sluice/index

go 1.26
