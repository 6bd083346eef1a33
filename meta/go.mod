module github.com/sluicemq/sluice/meta

go 1.26
