package main

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	// The drivers the command can reach. The memory driver is built into
	// the root package and needs no import.
	_ "github.com/fleetstore/fleetstore/drivers/memcached"
	_ "github.com/fleetstore/fleetstore/drivers/postgres"
	_ "github.com/fleetstore/fleetstore/drivers/redis"
	_ "github.com/fleetstore/fleetstore/drivers/valkey"
)

// go-redis prints every failed dial to stderr through a process-wide
// logger, one line per failed call during an outage. The command reports
// errors itself (counted per class), so it silences that logger; a library
// must not, an application may.
func init() { goredis.SetLogger(quiet{}) }

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
