module github.com/sluicemq/sluice/segment

go 1.26
