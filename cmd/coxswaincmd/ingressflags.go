package coxswaincmd

import (
	"flag"
	"fmt"

	ingresstranslate "github.com/coxswain-labs/coxswain/modules/ingress/translate"
)

// ingressFlags are --ingress-http-address and --ingress-https-address, which serve and
// controller share: where the implicit Ingress Gateways listen (docs/ingress.md).
type ingressFlags struct{ http, https string }

func (f *ingressFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.http, "ingress-http-address", ingresstranslate.DefaultHTTPAddress,
		"IP:port the HTTP listener of networking.k8s.io Ingresses binds (0.0.0.0 or :: for every address)")
	fs.StringVar(&f.https, "ingress-https-address", ingresstranslate.DefaultHTTPSAddress,
		"IP:port the HTTPS listener of networking.k8s.io Ingresses (their spec.tls hosts) binds")
}

func (f *ingressFlags) check() error {
	if err := ingresstranslate.ValidateAddress(f.http); err != nil {
		return fmt.Errorf("--ingress-http-address %q: %w", f.http, err)
	}
	if err := ingresstranslate.ValidateAddress(f.https); err != nil {
		return fmt.Errorf("--ingress-https-address %q: %w", f.https, err)
	}
	return nil
}

// settings are the translator's KindSettings.
func (f *ingressFlags) settings() map[string]string {
	return map[string]string{ingresstranslate.SettingHTTPAddress: f.http, ingresstranslate.SettingHTTPSAddress: f.https}
}
