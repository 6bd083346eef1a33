module github.com/sluicemq/sluice/index

go 1.26

require github.com/cockroachdb/datadriven v1.0.3

require github.com/pmezard/go-difflib v1.0.0 // indirect
