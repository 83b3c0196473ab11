package translate

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/controller/translator/translatortest"
	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
)

// docSep splits multi-document YAML.
var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// loadStore decodes a multi-document Kubernetes YAML file into a Store, strictly: an unknown
// field in a test input is a typo in the test. It is test-only; the standalone loader is the
// product's decoder.
func loadStore(path string) (*translator.Store, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &translator.Store{}
	for i, doc := range docSep.Split(string(data), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		if err := decodeInto(s, []byte(doc)); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
	}
	return s, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func decodeInto(s *translator.Store, doc []byte) error {
	var h struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &h); err != nil {
		return err
	}
	strict := func(v any) error { return yaml.UnmarshalStrict(bytes.TrimSpace(doc), v) }
	switch h.Kind {
	case "GatewayClass":
		o := &gwapiv1.GatewayClass{}
		s.GatewayClasses = append(s.GatewayClasses, o)
		return strict(o)
	case "Gateway":
		o := &gwapiv1.Gateway{}
		s.Gateways = append(s.Gateways, o)
		return strict(o)
	case "ListenerSet":
		o := &gwapiv1.ListenerSet{}
		s.ListenerSets = append(s.ListenerSets, o)
		return strict(o)
	case "HTTPRoute":
		o := &gwapiv1.HTTPRoute{}
		s.Add(translatortest.HTTPRoute, o)
		return strict(o)
	case "ReferenceGrant":
		o := &gwapiv1b1.ReferenceGrant{}
		s.ReferenceGrants = append(s.ReferenceGrants, o)
		return strict(o)
	case "Service":
		o := &corev1.Service{}
		s.Services = append(s.Services, o)
		return strict(o)
	case "EndpointSlice":
		o := &discoveryv1.EndpointSlice{}
		s.EndpointSlices = append(s.EndpointSlices, o)
		return strict(o)
	case "Secret":
		o := &corev1.Secret{}
		s.Secrets = append(s.Secrets, o)
		return strict(o)
	case "Namespace":
		o := &corev1.Namespace{}
		s.Namespaces = append(s.Namespaces, o)
		return strict(o)
	case infrav1a1.GatewayParametersKind:
		o := &infrav1a1.CoxswainGatewayParameters{}
		s.GatewayParameters = append(s.GatewayParameters, o)
		return strict(o)
	}
	return fmt.Errorf("unsupported kind %q", h.Kind)
}
