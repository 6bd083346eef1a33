module github.com/sluicemq/sluice/tools

go 1.26
