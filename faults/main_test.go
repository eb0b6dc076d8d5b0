package faults

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	_ "github.com/fleetstore/fleetstore/drivers/memcached"
	_ "github.com/fleetstore/fleetstore/drivers/redis"
	_ "github.com/fleetstore/fleetstore/drivers/valkey"
	"github.com/fleetstore/fleetstore/internal/testing/testserver"
)

func TestMain(m *testing.M) {
	bin := testserver.ValkeyBinary()
	version := "not found"
	if out, err := exec.Command(bin, "--version").Output(); err == nil {
		version = strings.TrimSpace(string(out))
	}
	note := ""
	if bin != "valkey-server" {
		note = " (no valkey-server on PATH: same protocol)"
	}
	fmt.Printf("faults: the valkey driver runs against %s%s: %s\n", bin, note, version)
	os.Exit(m.Run())
}
