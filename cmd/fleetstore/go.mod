module github.com/fleetstore/fleetstore/cmd/fleetstore

go 1.26.8

replace (
	github.com/fleetstore/fleetstore => ../../
	github.com/fleetstore/fleetstore/fleetotel => ../../fleetotel
)

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0
	github.com/fleetstore/fleetstore v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	golang.org/x/term v0.48.0
)

require (
	github.com/bradfitz/gomemcache v0.0.0-20260422231931-4d751bb6e37c // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/valkey-io/valkey-go v1.0.79 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
