package queries

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/asof"
)

// The parameters of GET /access-report (docs/history.md, "The access report").
const (
	paramFrom   = "from"
	paramTo     = "to"
	paramFormat = "format"
)

// ReportQuery is a parsed GET /access-report: the range [From, To) and the format.
type ReportQuery struct {
	From, To time.Time
	CSV      bool
}

// ParseReportQuery reads from and to (RFC 3339, both required, from before to) and format
// (json, the default, or csv).
func ParseReportQuery(rawQuery string) (ReportQuery, error) {
	v, err := ParseQuery(rawQuery, paramFrom, paramTo, paramFormat)
	if err != nil {
		return ReportQuery{}, err
	}
	var q ReportQuery
	var p problems
	for name, dst := range map[string]*time.Time{paramFrom: &q.From, paramTo: &q.To} {
		s, ok := one(v, name)
		if !ok {
			p.Add(name, "is required")
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			p.Add(name, "must be an RFC 3339 date and time, e.g. 2026-03-31T23:59:59Z")
			continue
		}
		*dst = t
	}
	switch f, _ := one(v, paramFormat); f {
	case "", "json":
	case "csv":
		q.CSV = true
	default:
		p.Add(paramFormat, "must be json or csv")
	}
	if !q.From.IsZero() && !q.To.IsZero() && asof.Millis(q.From) >= asof.Millis(q.To) {
		p.Add(paramTo, "must be after from (the range is [from, to), in milliseconds)")
	}
	return q, p.Err(invalidQuery)
}

// checkReport resolves the tenant's tables and refuses a range the index cannot answer:
// one that ends in the future, or begins before the kept history.
func (s *Service) checkReport(ctx context.Context, system, tenant string, q ReportQuery) (tables, error) {
	if q.To.After(s.now()) {
		return tables{}, apperr.InvalidField(paramTo, "must not be in the future")
	}
	t, err := s.tables(ctx, system, tenant)
	if err != nil {
		return tables{}, err
	}
	if err := asof.NewReader(s.db).Check(ctx, t.users, q.From, s.now(), s.retention); err != nil {
		if errors.Is(err, asof.ErrFuture) {
			return tables{}, apperr.InvalidField(paramFrom, "must not be in the future")
		}
		return tables{}, s.fail(t, storageOr(asOfError(err)))
	}
	return t, nil
}

// AccessReport hands emit every membership interval of the tenant that overlaps
// [q.From, q.To), a page at a time; start runs once the range is known to be answerable,
// before the first page (the HTTP answer's status and headers).
func (s *Service) AccessReport(ctx context.Context, system, tenant string, q ReportQuery, start func() error, emit func([]asof.Row) error) error {
	t, err := s.checkReport(ctx, system, tenant, q)
	if err != nil {
		return err
	}
	if err := start(); err != nil {
		return err
	}
	err = asof.Report(ctx, s.db, t.users, asof.Millis(q.From), asof.Millis(q.To), s.reportPage, emit)
	if err != nil {
		return s.fail(t, storageOr(err))
	}
	return nil
}

// reportWriteWindow is how long the writing of one page of the report may take: the
// server's write timeout is moved on by it before each page, so a long report is bounded
// by its progress, not its size.
const reportWriteWindow = time.Minute

// accessReport is GET /access-report: the answer streams, a page of rows at a time,
// flushed as it is read; an error after the first byte aborts the connection (a client
// sees a truncated answer fail, never a shorter report that looks whole).
func (h *Handlers) accessReport(c echo.Context) error {
	q, err := ParseReportQuery(c.Request().URL.RawQuery)
	if err != nil {
		return err
	}
	res := c.Response()
	rc := http.NewResponseController(res.Writer)
	w := bufio.NewWriterSize(res, 32<<10)
	first, started := true, false
	start := func() error {
		started = true
		hd := res.Header()
		hd.Set("Cache-Control", "no-store")
		name := "access-report-" + q.From.UTC().Format("20060102T150405Z") + "-" + q.To.UTC().Format("20060102T150405Z")
		if q.CSV {
			hd.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
			hd.Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`.csv"`)
		} else {
			hd.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
			hd.Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`.json"`)
		}
		res.WriteHeader(http.StatusOK)
		if q.CSV {
			writeCSVRow(w, reportColumns)
			return nil
		}
		head, _ := json.Marshal(map[string]string{"from": q.From.UTC().Format(time.RFC3339Nano), "to": q.To.UTC().Format(time.RFC3339Nano)})
		_, err := w.Write(append(head[:len(head)-1], `,"items":[`...))
		return err
	}
	emit := func(rows []asof.Row) error {
		_ = rc.SetWriteDeadline(time.Now().Add(reportWriteWindow))
		for _, r := range rows {
			if q.CSV {
				writeCSVRow(w, csvCells(r))
				continue
			}
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if !first {
				_ = w.WriteByte(',')
			}
			first = false
			_ = w.WriteByte('\n')
			_, _ = w.Write(b)
		}
		if err := w.Flush(); err != nil {
			return err
		}
		// A writer that cannot flush (Lambda's, which buffers the whole answer) gets the
		// rows as they come all the same.
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	}
	system, tenant := tenantOf(c)
	err = h.svc.AccessReport(c.Request().Context(), system, tenant, q, start, emit)
	if err != nil {
		if started {
			panic(http.ErrAbortHandler)
		}
		return err
	}
	if !q.CSV {
		_, _ = w.WriteString("\n]}\n")
	}
	if err := w.Flush(); err != nil {
		panic(http.ErrAbortHandler)
	}
	return nil
}

// reportColumns is the CSV report's header row.
var reportColumns = []string{"group", "group_id", "username", "user_id", "erased", "added_at", "added_by",
	"removed_at", "removed_by", "expires_at", "user_periods"}

// csvTime is an instant in a CSV cell: RFC 3339, UTC, milliseconds.
const csvTime = "2006-01-02T15:04:05.000Z07:00"

func csvCells(r asof.Row) []string {
	tm := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(csvTime)
	}
	periods := make([]string, 0, len(r.UserPeriods))
	for _, p := range r.UserPeriods {
		periods = append(periods, string(p.Status)+" "+p.From.UTC().Format(csvTime)+"/"+tm(p.To))
	}
	erased := ""
	if r.Erased {
		erased = "true"
	}
	added := r.AddedAt
	return []string{r.Group, r.GroupID, r.Username, r.UserID, erased, tm(&added), r.AddedBy,
		tm(r.RemovedAt), r.RemovedBy, tm(r.ExpiresAt), strings.Join(periods, "; ")}
}

// writeCSVRow writes one row (RFC 4180): every cell quoted, quotes doubled, and a cell
// that a spreadsheet would read as a formula — one beginning with =, +, -, @, a tab or a
// carriage return (OWASP, CSV injection) — begun with a ' so it is shown as text. The
// JSON answer keeps every value exactly as recorded.
func writeCSVRow(w *bufio.Writer, cells []string) {
	for i, c := range cells {
		if i > 0 {
			_ = w.WriteByte(',')
		}
		_ = w.WriteByte('"')
		if c != "" && strings.ContainsRune("=+-@\t\r", rune(c[0])) {
			_ = w.WriteByte('\'')
		}
		_, _ = w.WriteString(strings.ReplaceAll(c, `"`, `""`))
		_ = w.WriteByte('"')
	}
	_, _ = w.WriteString("\r\n")
}
