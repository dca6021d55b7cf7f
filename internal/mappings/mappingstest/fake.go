// Package mappingstest is a fake of Lambda's event source mapping control plane, with the
// behaviour of the real one that provisioning depends on: a second mapping of the same
// stream to the same function is refused with 409 ResourceConflictException naming the
// existing mapping's UUID, and the account's calls are limited by a token bucket of 15 a
// second (429 TooManyRequestsException beyond it). It speaks the REST-JSON protocol the
// SDK uses, so the code under test runs its real client against it.
package mappingstest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"
)

// AccountRate is Lambda's control-plane limit per account (calls a second).
const AccountRate = 15

// Mapping is a mapping as the fake keeps it.
type Mapping struct {
	UUID                           string
	FunctionArn                    string
	EventSourceArn                 string
	StartingPosition               string
	BatchSize                      int
	ParallelizationFactor          int
	FunctionResponseTypes          []string
	BisectBatchOnFunctionError     bool
	MaximumRetryAttempts           int
	MaximumRecordAgeInSeconds      int
	MaximumBatchingWindowInSeconds int
	OnFailure                      string
	// State and LastProcessingResult are what List reports (default Enabled, none): set
	// them with SetState to play a mapping that stopped polling.
	State, LastProcessingResult string
}

// Fake is the control plane; URL is its endpoint (AWS_ENDPOINT_URL_LAMBDA).
type Fake struct {
	URL string

	srv    *httptest.Server
	bucket *rate.Limiter

	mu        sync.Mutex
	mappings  map[string]*Mapping
	calls     map[string]int
	throttled int
	conflicts int
	updates   int
}

// New starts a fake; Close stops it.
func New() *Fake {
	f := &Fake{mappings: map[string]*Mapping{}, calls: map[string]int{}, bucket: rate.NewLimiter(AccountRate, AccountRate)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL
	return f
}

// Close stops the server.
func (f *Fake) Close() { f.srv.Close() }

// Mappings are the mappings that exist, by UUID order.
func (f *Fake) Mappings() []Mapping {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Mapping, 0, len(f.mappings))
	for _, m := range f.mappings {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UUID < out[j].UUID })
	return out
}

// Calls counts the calls by operation (Create, List, Update, Delete), throttled ones included.
func (f *Fake) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Throttled is how many calls the account's limit refused.
func (f *Fake) Throttled() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.throttled
}

// Conflicts is how many creates were refused with 409.
func (f *Fake) Conflicts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conflicts
}

const base = "/2015-03-31/event-source-mappings"

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	op := map[string]string{http.MethodPost: "Create", http.MethodGet: "List", http.MethodDelete: "Delete", http.MethodPut: "Update"}[r.Method]
	id := strings.Trim(strings.TrimPrefix(r.URL.Path, base), "/")
	if r.Method == http.MethodGet && id != "" {
		op = "Get"
	}
	f.mu.Lock()
	f.calls[op]++
	if !f.bucket.AllowN(time.Now(), 1) {
		f.throttled++
		f.mu.Unlock()
		fail(w, http.StatusTooManyRequests, "TooManyRequestsException", "Rate exceeded")
		return
	}
	defer f.mu.Unlock()
	if !strings.HasPrefix(r.URL.Path, base) || op == "" {
		fail(w, http.StatusNotFound, "ResourceNotFoundException", "no such operation")
		return
	}
	switch op {
	case "Create":
		f.create(w, r)
	case "List":
		f.list(w, r)
	case "Update":
		f.update(w, r, id)
	case "Get", "Delete":
		m, ok := f.mappings[id]
		if !ok {
			fail(w, http.StatusNotFound, "ResourceNotFoundException", "The resource you requested does not exist.")
			return
		}
		if op == "Delete" {
			delete(f.mappings, id)
			w.WriteHeader(http.StatusAccepted)
		}
		_ = json.NewEncoder(w).Encode(wire(m, "Deleting"))
	}
}

func (f *Fake) create(w http.ResponseWriter, r *http.Request) {
	var in struct {
		FunctionName                   string
		EventSourceArn                 string
		StartingPosition               string
		BatchSize                      int
		ParallelizationFactor          int
		FunctionResponseTypes          []string
		BisectBatchOnFunctionError     bool
		MaximumRetryAttempts           *int
		MaximumRecordAgeInSeconds      *int
		MaximumBatchingWindowInSeconds int
		DestinationConfig              struct{ OnFailure struct{ Destination string } }
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.FunctionName == "" || in.EventSourceArn == "" {
		fail(w, http.StatusBadRequest, "InvalidParameterValueException", "FunctionName and EventSourceArn are required")
		return
	}
	if !strings.Contains(in.EventSourceArn, ":dynamodb:") || in.StartingPosition == "" {
		fail(w, http.StatusBadRequest, "InvalidParameterValueException", "a DynamoDB stream needs a StartingPosition")
		return
	}
	for _, m := range f.mappings {
		if m.FunctionArn == in.FunctionName && m.EventSourceArn == in.EventSourceArn {
			f.conflicts++
			fail(w, http.StatusConflict, "ResourceConflictException", fmt.Sprintf(
				"The event source arn (\" %s \") and function (\" %s \") provided mapping already exists. Please update or delete the existing mapping with UUID %s",
				in.EventSourceArn, in.FunctionName, m.UUID))
			return
		}
	}
	// AWS's defaults where the request is silent: infinite retries and age (-1).
	m := &Mapping{UUID: uuid.NewString(), FunctionArn: in.FunctionName, EventSourceArn: in.EventSourceArn,
		StartingPosition: in.StartingPosition, BatchSize: in.BatchSize, ParallelizationFactor: in.ParallelizationFactor,
		FunctionResponseTypes: in.FunctionResponseTypes, BisectBatchOnFunctionError: in.BisectBatchOnFunctionError,
		MaximumRetryAttempts: -1, MaximumRecordAgeInSeconds: -1, MaximumBatchingWindowInSeconds: in.MaximumBatchingWindowInSeconds,
		OnFailure: in.DestinationConfig.OnFailure.Destination}
	if in.MaximumRetryAttempts != nil {
		m.MaximumRetryAttempts = *in.MaximumRetryAttempts
	}
	if in.MaximumRecordAgeInSeconds != nil {
		m.MaximumRecordAgeInSeconds = *in.MaximumRecordAgeInSeconds
	}
	if m.ParallelizationFactor == 0 {
		m.ParallelizationFactor = 1
	}
	f.mappings[m.UUID] = m
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(wire(m, "Creating"))
}

// update changes the settings the request names; as Lambda, it refuses a mapping that is
// not Enabled or Disabled, and a starting position (which no mapping can change).
func (f *Fake) update(w http.ResponseWriter, r *http.Request, id string) {
	m, ok := f.mappings[id]
	if !ok {
		fail(w, http.StatusNotFound, "ResourceNotFoundException", "The resource you requested does not exist.")
		return
	}
	if m.State != "" && m.State != "Enabled" && m.State != "Disabled" {
		fail(w, http.StatusBadRequest, "ResourceInUseException", "Cannot update the event source mapping because it is in use.")
		return
	}
	var in struct {
		FunctionName                   *string
		BatchSize                      *int
		ParallelizationFactor          *int
		FunctionResponseTypes          []string
		BisectBatchOnFunctionError     *bool
		MaximumRetryAttempts           *int
		MaximumRecordAgeInSeconds      *int
		MaximumBatchingWindowInSeconds *int
		StartingPosition               *string
		DestinationConfig              *struct{ OnFailure *struct{ Destination string } }
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.StartingPosition != nil {
		fail(w, http.StatusBadRequest, "InvalidParameterValueException", "bad update")
		return
	}
	if in.FunctionName != nil && *in.FunctionName != m.FunctionArn {
		fail(w, http.StatusBadRequest, "InvalidParameterValueException", "this fake does not move a mapping to another function")
		return
	}
	f.updates++
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&m.BatchSize, in.BatchSize)
	set(&m.ParallelizationFactor, in.ParallelizationFactor)
	set(&m.MaximumRetryAttempts, in.MaximumRetryAttempts)
	set(&m.MaximumRecordAgeInSeconds, in.MaximumRecordAgeInSeconds)
	set(&m.MaximumBatchingWindowInSeconds, in.MaximumBatchingWindowInSeconds)
	if in.FunctionResponseTypes != nil {
		m.FunctionResponseTypes = in.FunctionResponseTypes
	}
	if in.BisectBatchOnFunctionError != nil {
		m.BisectBatchOnFunctionError = *in.BisectBatchOnFunctionError
	}
	if in.DestinationConfig != nil {
		m.OnFailure = ""
		if in.DestinationConfig.OnFailure != nil {
			m.OnFailure = in.DestinationConfig.OnFailure.Destination
		}
	}
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(wire(m, "Updating"))
}

// Updates is how many updates the fake applied.
func (f *Fake) Updates() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.updates
}

// SetOnFailure replaces a mapping's failure destination, as an older version made it;
// false if there is none.
func (f *Fake) SetOnFailure(uuid, destination string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.mappings[uuid]
	if ok {
		m.OnFailure = destination
	}
	return ok
}

func (f *Fake) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var all []*Mapping
	for _, m := range f.mappings {
		if fn := q.Get("FunctionName"); fn != "" && m.FunctionArn != fn {
			continue
		}
		if src := q.Get("EventSourceArn"); src != "" && m.EventSourceArn != src {
			continue
		}
		all = append(all, m)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].UUID < all[j].UUID })
	start, _ := strconv.Atoi(q.Get("Marker"))
	size := 100
	if n, err := strconv.Atoi(q.Get("MaxItems")); err == nil && n > 0 && n < size {
		size = n
	}
	out := struct {
		EventSourceMappings []map[string]any
		NextMarker          string `json:",omitempty"`
	}{EventSourceMappings: []map[string]any{}}
	end := min(start+size, len(all))
	for _, m := range all[min(start, len(all)):end] {
		state := m.State
		if state == "" {
			state = "Enabled"
		}
		w := wire(m, state)
		if m.LastProcessingResult != "" {
			w["LastProcessingResult"] = m.LastProcessingResult
		}
		out.EventSourceMappings = append(out.EventSourceMappings, w)
	}
	if end < len(all) {
		out.NextMarker = strconv.Itoa(end)
	}
	_ = json.NewEncoder(w).Encode(out)
}

func wire(m *Mapping, state string) map[string]any {
	out := map[string]any{"UUID": m.UUID, "FunctionArn": m.FunctionArn, "EventSourceArn": m.EventSourceArn,
		"StartingPosition": m.StartingPosition, "BatchSize": m.BatchSize, "ParallelizationFactor": m.ParallelizationFactor,
		"FunctionResponseTypes": m.FunctionResponseTypes, "BisectBatchOnFunctionError": m.BisectBatchOnFunctionError,
		"MaximumRetryAttempts": m.MaximumRetryAttempts, "MaximumRecordAgeInSeconds": m.MaximumRecordAgeInSeconds,
		"MaximumBatchingWindowInSeconds": m.MaximumBatchingWindowInSeconds, "State": state}
	if m.OnFailure != "" {
		out["DestinationConfig"] = map[string]any{"OnFailure": map[string]any{"Destination": m.OnFailure}}
	}
	return out
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Amzn-ErrorType", code)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": msg})
}
