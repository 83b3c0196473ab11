package coxswaincmd

import (
	"strings"
	"testing"
)

func TestCheckProvisioning(t *testing.T) {
	base := func() controllerConfig {
		return controllerConfig{provisioning: "auto", serviceType: "LoadBalancer",
			proxySelector: "app.kubernetes.io/name=coxswain,app.kubernetes.io/component=proxy", portRange: "20000-29999"}
	}
	for _, tc := range []struct {
		name   string
		change func(*controllerConfig)
		shared bool
		err    string
	}{
		{name: "auto: shared", change: func(*controllerConfig) {}, shared: true},
		{name: "auto with a pool: none", change: func(c *controllerConfig) { c.addressPool = "10.0.0.0/24" }},
		{name: "auto with the in-process proxy: none", change: func(c *controllerConfig) { c.dataPlane.inProcess = true }},
		{name: "none", change: func(c *controllerConfig) { c.provisioning = "none" }},
		{name: "shared with a pool", change: func(c *controllerConfig) { c.provisioning = "shared"; c.addressPool = "10.0.0.0/24" }, err: "exclusive"},
		{name: "an unknown mode", change: func(c *controllerConfig) { c.provisioning = "dedicated" }, err: "--gateway-provisioning"},
		{name: "an unknown Service type", change: func(c *controllerConfig) { c.serviceType = "ExternalName" }, err: "--gateway-service-type"},
		{name: "an empty selector", change: func(c *controllerConfig) { c.proxySelector = "" }, err: "--shared-proxy-selector"},
		{name: "a range below 1024", change: func(c *controllerConfig) { c.portRange = "80-90" }, err: "--internal-port-range"},
		{name: "a range that is not one", change: func(c *controllerConfig) { c.portRange = "20000" }, err: "--internal-port-range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.change(&c)
			err := c.checkProvisioning()
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one naming %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case (c.provision != nil) != tc.shared:
				t.Fatalf("provisioning %+v, want shared=%v", c.provision, tc.shared)
			}
		})
	}
}
