module github.com/sluicemq/sluice/coordinator

go 1.26
