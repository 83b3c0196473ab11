package coxswaincmd

import (
	"bytes"
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/coxswain-labs/coxswain/cmd/proxycmd"
	"github.com/coxswain-labs/coxswain/controller/standalone"
	ingresstranslate "github.com/coxswain-labs/coxswain/modules/ingress/translate"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// migrateFlags are validate's flags for -o gateway-api: the Gateway that takes the Ingresses'
// listeners.
type migrateFlags struct{ namespace, name, class string }

func (f *migrateFlags) register(fsReg func(p *string, name, value, usage string)) {
	fsReg(&f.namespace, "gateway-namespace", "default", "-o gateway-api: namespace of the Gateway that replaces the Ingress listeners")
	fsReg(&f.name, "gateway-name", "ingress", "-o gateway-api: its name")
	fsReg(&f.class, "gateway-class", "coxswain", "-o gateway-api: its GatewayClass")
}

// printGatewayAPI writes the Gateway API objects that express the Ingresses under path (YAML,
// ready to apply; what they cannot carry as comments, and on stderr).
func printGatewayAPI(e *proxycmd.Env, path string, ing ingressFlags, mf migrateFlags) int {
	ld, err := standalone.Load(context.Background(), path, e.Reg)
	if err != nil {
		fmt.Fprintf(e.Stderr, "coxswain validate: %v\n", err)
		return 1
	}
	for _, le := range ld.Errors {
		fmt.Fprintf(e.Stderr, "warning: %v\n", le)
	}
	var objs []translation.Object
	for _, gk := range []schema.GroupKind{{Group: networkingv1.GroupName, Kind: "IngressClass"}, {Group: networkingv1.GroupName, Kind: "Ingress"}} {
		objs = append(objs, ld.Store.Objects[gk]...)
	}
	m := ingresstranslate.Migrate(objs, ingresstranslate.MigrateOptions{Namespace: mf.namespace, Name: mf.name, Class: mf.class,
		HTTPAddress: ing.http, HTTPSAddress: ing.https})
	var out bytes.Buffer
	out.WriteString("# Gateway API objects for the Ingresses of " + path + " (coxswain validate -o gateway-api).\n")
	for _, n := range m.Notes {
		out.WriteString("# note: " + n + "\n")
		fmt.Fprintf(e.Stderr, "note: %s\n", n)
	}
	for _, o := range m.Objects {
		b, err := objectYAML(o)
		if err != nil {
			fmt.Fprintf(e.Stderr, "coxswain validate: %v\n", err)
			return 1
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	if _, err := e.Stdout.Write(out.Bytes()); err != nil {
		return 1
	}
	return 0
}

// objectYAML is o without the fields a new object has no business carrying (status, a null
// creationTimestamp).
func objectYAML(o runtime.Object) ([]byte, error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		u = &unstructured.Unstructured{Object: m}
	}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return yaml.Marshal(u.Object)
}
