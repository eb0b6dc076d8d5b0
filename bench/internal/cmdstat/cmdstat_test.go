package cmdstat

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=3000,usec=150000,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=1,usec=20,usec_per_call=20.00\r\n" +
		"cmdstat_config:calls=1,usec=5,usec_per_call=5.00\r\n" +
		"cmdstat_ping:calls=7,usec=7,usec_per_call=1.00\r\n" +
		"not a stat line\r\n"
	want := []Stat{{"evalsha", "3000", "50.00"}, {"ping", "7", "1.00"}}
	if got := Parse(info); !reflect.DeepEqual(got, want) {
		t.Errorf("Parse = %+v, want %+v", got, want)
	}
}
