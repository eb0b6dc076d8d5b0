package webhooktest_test

import (
	"fmt"
	"time"

	"github.com/fleetstore/fleetstore/webhook/webhooktest"
)

// GitHub's docs' example delivery, signed as GitHub signs it.
func ExampleGitHub() {
	r, err := webhooktest.GitHub(webhooktest.Delivery{
		URL:    "http://127.0.0.1:8080/hooks/github/acme",
		Body:   []byte("Hello, World!"),
		Secret: "It's a Secret to Everybody",
		ID:     "72d3162e-cc78-11e3-81ab-4c9367dc0958",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Header.Get("X-Hub-Signature-256"))
	fmt.Println(r.Header.Get("X-GitHub-Delivery"))
	// Output:
	// sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17
	// 72d3162e-cc78-11e3-81ab-4c9367dc0958
}

// Sign picks the provider by name, as a program reading it from its
// configuration does.
func ExampleSign() {
	r, err := webhooktest.Sign("stripe", webhooktest.Delivery{
		URL:    "http://127.0.0.1:8080/hooks/stripe/acme",
		Body:   []byte(`{"id":"evt_1","object":"event","type":"customer.created"}`),
		Secret: "whsec_test",
		Time:   time.Unix(1767225600, 0),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Method, r.URL.Path)
	fmt.Println(r.Header.Get("Stripe-Signature"))
	// Output:
	// POST /hooks/stripe/acme
	// t=1767225600,v1=2e3a7a54bdb1a3cd9a1a6baab47c21686a7e69633aa1f860ac7e87898e649bc4
}
