module github.com/sluicemq/sluice/server

go 1.26
