package extproc_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	// Linked for their types only: protojson resolves each typed_config's
	// "@type" through the global registry these packages register into.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// loadEnvoyConfig reads envoy.yaml the way a control plane would: YAML to
// JSON, then protojson into the v3 Bootstrap, rejecting unknown fields.
func loadEnvoyConfig(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	raw, err := os.ReadFile("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := yaml.Unmarshal(raw, &tree); err != nil {
		t.Fatalf("envoy.yaml is not YAML: %v", err)
	}
	js, err := json.Marshal(tree)
	if err != nil {
		t.Fatalf("envoy.yaml does not convert to JSON: %v", err)
	}
	var bs bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &bs); err != nil {
		t.Fatalf("envoy.yaml does not parse as envoy.config.bootstrap.v3.Bootstrap: %v", err)
	}
	return &bs
}

// validator is implemented by every message protoc-gen-validate generated.
type validator interface{ ValidateAll() error }

// visitTyped calls visit for m and, recursively, for every message packed in
// an Any below it (every typed_config), after unpacking it through the global
// registry. An Any whose type is not linked in fails the test.
func visitTyped(t *testing.T, m proto.Message, visit func(proto.Message)) {
	t.Helper()
	visit(m)
	var walk func(protoreflect.Message)
	walk = func(msg protoreflect.Message) {
		if a, ok := msg.Interface().(*anypb.Any); ok {
			inner, err := a.UnmarshalNew()
			if err != nil {
				t.Errorf("typed_config %q: %v", a.GetTypeUrl(), err)
				return
			}
			visitTyped(t, inner, visit)
			return
		}
		msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				l := v.List()
				for i := range l.Len() {
					walk(l.Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message())
					return true
				})
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				walk(v.Message())
			}
			return true
		})
	}
	walk(m.ProtoReflect())
}

func TestEnvoyConfig(t *testing.T) {
	bs := loadEnvoyConfig(t)

	var extProcs []*extprocfilterv3.ExternalProcessor
	h2Clusters := 0
	typed := 0
	visitTyped(t, bs, func(m proto.Message) {
		typed++
		if v, ok := m.(validator); ok {
			if err := v.ValidateAll(); err != nil {
				t.Errorf("%s fails validation: %v", m.ProtoReflect().Descriptor().FullName(), err)
			}
		}
		switch m := m.(type) {
		case *extprocfilterv3.ExternalProcessor:
			extProcs = append(extProcs, m)
		case *upstreamhttpv3.HttpProtocolOptions:
			if m.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil {
				h2Clusters++
			}
		}
	})
	// Bootstrap, HttpConnectionManager, ExternalProcessor, Router, HttpProtocolOptions.
	if typed != 5 {
		t.Errorf("visited %d typed messages, want 5 (bootstrap and four typed_configs)", typed)
	}
	if len(extProcs) != 1 {
		t.Fatalf("found %d ext_proc filters, want 1", len(extProcs))
	}
	ep := extProcs[0]

	mode := ep.GetProcessingMode()
	if got := mode.GetRequestHeaderMode(); got != extprocfilterv3.ProcessingMode_SEND {
		t.Errorf("request_header_mode = %v, want SEND (admission needs the request headers)", got)
	}
	if got := mode.GetResponseHeaderMode(); got != extprocfilterv3.ProcessingMode_SEND {
		t.Errorf("response_header_mode = %v, want SEND (headroom is stamped on the response headers)", got)
	}
	if got := mode.GetResponseTrailerMode(); got != extprocfilterv3.ProcessingMode_SEND {
		t.Errorf("response_trailer_mode = %v, want SEND (with SKIP, backend trailers could carry router-owned headers)", got)
	}
	if got := mode.GetRequestBodyMode(); got != extprocfilterv3.ProcessingMode_NONE {
		t.Errorf("request_body_mode = %v, want NONE", got)
	}
	if got := mode.GetResponseBodyMode(); got != extprocfilterv3.ProcessingMode_NONE {
		t.Errorf("response_body_mode = %v, want NONE", got)
	}
	if ep.GetFailureModeAllow() {
		t.Error("failure_mode_allow = true; the example must fail closed")
	}
	// Envoy's default message timeout (200ms) would cut every queue wait short.
	if d := ep.GetMessageTimeout().AsDuration(); d < 10*time.Second {
		t.Errorf("message_timeout = %v, want at least 10s so queued requests can wait", d)
	}

	// The filter's gRPC cluster exists and speaks HTTP/2.
	target := ep.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	if target == "" {
		t.Fatal("ext_proc grpc_service names no envoy_grpc cluster")
	}
	found := false
	for _, c := range bs.GetStaticResources().GetClusters() {
		if c.GetName() != target {
			continue
		}
		found = true
		opts, ok := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
		if !ok {
			t.Fatalf("cluster %q has no HttpProtocolOptions; gRPC needs HTTP/2", target)
		}
		var po upstreamhttpv3.HttpProtocolOptions
		if err := opts.UnmarshalTo(&po); err != nil {
			t.Fatal(err)
		}
		if po.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
			t.Errorf("cluster %q does not use explicit HTTP/2", target)
		}
	}
	if !found {
		t.Errorf("ext_proc names cluster %q, which envoy.yaml does not define", target)
	}
	if h2Clusters != 1 {
		t.Errorf("found %d HTTP/2 clusters, want 1", h2Clusters)
	}
}
