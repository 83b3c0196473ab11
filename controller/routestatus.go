package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// routeStatusClient gives the status writer its access to one route kind: reads from the
// kind's informer cache, a fresh read and the /status update through its REST client.
func routeStatusClient(mk *moduleKind, api translation.RouteAPI, rc rest.Interface) status.Routes {
	kind := api.GVK.Kind
	typed := func(o any) (translation.Object, error) {
		obj, ok := o.(translation.Object)
		if !ok || api.Status(obj) == nil {
			return nil, fmt.Errorf("%s cache holds a %T", kind, o)
		}
		return obj, nil
	}
	return status.RouteClient[translation.Object]{
		KindName: kind,
		Cached: func(namespace, name string) (translation.Object, error) {
			o, ok, err := mk.informer.GetIndexer().GetByKey(namespace + "/" + name)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, apierrors.NewNotFound(mk.gvr.GroupResource(), name)
			}
			return typed(o)
		},
		List: func() ([]translation.Object, error) {
			objs := mk.informer.GetIndexer().List()
			out := make([]translation.Object, 0, len(objs))
			for _, o := range objs {
				r, err := typed(o)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			return out, nil
		},
		Get: func(ctx context.Context, namespace, name string) (translation.Object, error) {
			obj := api.New()
			err := rc.Get().Namespace(namespace).Resource(api.Resource).Name(name).Do(ctx).Into(obj)
			return obj, err
		},
		UpdateStatus: func(ctx context.Context, r translation.Object) error {
			return rc.Put().Namespace(r.GetNamespace()).Resource(api.Resource).Name(r.GetName()).
				SubResource("status").Body(r).Do(ctx).Error()
		},
		Status: func(r translation.Object) (types.NamespacedName, gwapiv1.RouteStatus) {
			return types.NamespacedName{Namespace: r.GetNamespace(), Name: r.GetName()}, *api.Status(r)
		},
		WithStatus: func(r translation.Object, st gwapiv1.RouteStatus) translation.Object {
			c := r.DeepCopyObject().(translation.Object) // the cached object is never modified
			*api.Status(c) = st
			return c
		},
	}
}
