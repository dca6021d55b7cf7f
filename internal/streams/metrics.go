package streams

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the ssodir_stream_* collectors. A tenant label (with system, since a tenant
// id is unique only within its system) is kept only where an operator needs to know which
// tenant: lag, dead letters, parked streams and gaps. Throughput and read position are per
// consumer, so that the series count does not grow with busy tenants.
type metrics struct {
	records      *prometheus.CounterVec   // consumer, event
	applySeconds *prometheus.HistogramVec // consumer
	lagSeconds   *prometheus.GaugeVec     // consumer, system, tenant
	iteratorAge  *prometheus.HistogramVec // consumer
	leasesHeld   *prometheus.GaugeVec     // consumer
	deadLetters  *prometheus.CounterVec   // consumer, system, tenant, kind
	parked       *prometheus.GaugeVec     // consumer, system, tenant
	gaps         *prometheus.CounterVec   // consumer, system, tenant
	readRetries  *prometheus.CounterVec   // consumer, kind
	// parkedStreams and parkedRecords: streams a handler parked (Park), and the records
	// waiting behind them.
	parkedStreams *prometheus.GaugeVec // consumer, system, tenant
	parkedRecords *prometheus.GaugeVec // consumer, system, tenant
	// getRecords and describes count Streams calls, for the cost of idle tenants.
	getRecords *prometheus.CounterVec // consumer, result (records, empty)
	apiCalls   *prometheus.CounterVec // consumer, call (DescribeStream, ListStreams)
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ssodir_stream_records_total",
			Help: "Stream records applied (acked by the handler), by event (INSERT, MODIFY, REMOVE, TTL_REMOVE).",
		}, []string{"consumer", "event"}),
		applySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ssodir_stream_apply_seconds",
			Help:    "Time from delivering a record to its ack.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"consumer"}),
		lagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ssodir_stream_lag_seconds",
			Help: "Time from the writer's time stamp in the last applied record to its apply.",
		}, []string{"consumer", "system", "tenant"}),
		iteratorAge: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ssodir_stream_iterator_age_seconds",
			Help:    "Age (from the stream's approximate creation time) of the newest record of each page read with records, over all shards; near 0 at the tip.",
			Buckets: []float64{1, 2, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 24 * 3600},
		}, []string{"consumer"}),
		leasesHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ssodir_stream_leases_held",
			Help: "Shard leases this process holds.",
		}, []string{"consumer"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ssodir_stream_dead_letters_total",
			Help: "Records written to the dead-letter table: kind failed (retries exhausted) or parked (behind a failed record of the same aggregate).",
		}, []string{"consumer", "system", "tenant", "kind"}),
		parked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ssodir_stream_dead_letters_parked",
			Help: "Dead letters stored for the streams this process follows, as last counted.",
		}, []string{"consumer", "system", "tenant"}),
		gaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ssodir_stream_gaps_total",
			Help: "Shards whose checkpoint had fallen behind the stream's retention: data lost, the tenant needs a replay.",
		}, []string{"consumer", "system", "tenant"}),
		readRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ssodir_stream_read_retries_total",
			Help: "Streams API calls retried, by kind (throttled, expired, trimmed, server, connection, other).",
		}, []string{"consumer", "kind"}),
		parkedStreams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ssodir_stream_parked",
			Help: "1 while a handler holds one of the tenant's streams with streams.Park (its downstream is failing).",
		}, []string{"consumer", "system", "tenant"}),
		parkedRecords: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ssodir_stream_parked_records",
			Help: "Records read and not yet applied on the tenant's parked streams: they wait for the parked record.",
		}, []string{"consumer", "system", "tenant"}),
		getRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ssodir_stream_get_records_total",
			Help: "GetRecords calls that returned a page, by result (records, empty).",
		}, []string{"consumer", "result"}),
		apiCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ssodir_stream_api_calls_total",
			Help: "DescribeStream and ListStreams calls (account-limited), by call.",
		}, []string{"consumer", "call"}),
	}
	if reg == nil {
		return m, nil
	}
	// Several Subscribers in one process (projector and a re-drive, or tests) share the
	// collectors instead of failing on a duplicate registration.
	var err error
	if m.records, err = register(reg, m.records); err != nil {
		return nil, err
	}
	if m.applySeconds, err = register(reg, m.applySeconds); err != nil {
		return nil, err
	}
	if m.lagSeconds, err = register(reg, m.lagSeconds); err != nil {
		return nil, err
	}
	if m.iteratorAge, err = register(reg, m.iteratorAge); err != nil {
		return nil, err
	}
	if m.leasesHeld, err = register(reg, m.leasesHeld); err != nil {
		return nil, err
	}
	if m.deadLetters, err = register(reg, m.deadLetters); err != nil {
		return nil, err
	}
	if m.parked, err = register(reg, m.parked); err != nil {
		return nil, err
	}
	if m.gaps, err = register(reg, m.gaps); err != nil {
		return nil, err
	}
	if m.readRetries, err = register(reg, m.readRetries); err != nil {
		return nil, err
	}
	if m.parkedStreams, err = register(reg, m.parkedStreams); err != nil {
		return nil, err
	}
	if m.parkedRecords, err = register(reg, m.parkedRecords); err != nil {
		return nil, err
	}
	if m.getRecords, err = register(reg, m.getRecords); err != nil {
		return nil, err
	}
	if m.apiCalls, err = register(reg, m.apiCalls); err != nil {
		return nil, err
	}
	return m, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
