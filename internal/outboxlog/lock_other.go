//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package outboxlog

import (
	"fmt"
	"os"
	"runtime"
)

// lockDir refuses: without flock the directory cannot be kept from a
// second process, and two writers would interleave their segments.
func lockDir(dir string) (*os.File, error) {
	return nil, fmt.Errorf("outboxlog: %s: no directory lock on %s", dir, runtime.GOOS)
}
