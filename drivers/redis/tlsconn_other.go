//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos)

package redis

import "net"

// checkable returns c: go-redis checks no socket on this platform.
func checkable(c net.Conn) net.Conn { return c }
