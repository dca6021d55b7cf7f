package queries

import (
	"slices"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/apperr"
)

func TestParseEventsQuery(t *testing.T) {
	tests := []struct {
		name  string
		query string
		want  EventsQuery
		field string
	}{
		{name: "nothing reads from the start with the default page", query: "", want: EventsQuery{Limit: DefaultLimit}},
		{name: "a cursor, a limit and a wait are read", query: "after=abc&limit=500&wait=20",
			want: EventsQuery{After: "abc", Limit: 500, Wait: 20 * time.Second}},
		{name: "a wait of 0 answers at once", query: "wait=0", want: EventsQuery{Limit: DefaultLimit}},
		{name: "a wait over 20 s is refused", query: "wait=21", field: "wait"},
		{name: "a negative wait is refused", query: "wait=-1", field: "wait"},
		{name: "a wait as a duration is refused", query: "wait=5s", field: "wait"},
		{name: "a limit of 0 is refused", query: "limit=0", field: "limit"},
		{name: "an empty cursor is refused", query: "after=", field: "after"},
		{name: "the lists' cursor parameter is not this one", query: "cursor=abc", field: "cursor"},
		{name: "a cursor given twice is refused", query: "after=a&after=b", field: "after"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEventsQuery(tc.query)
			if tc.field != "" {
				if apperr.CodeOf(err) != apperr.CodeValidationFailed || !slices.Contains(fieldsOf(err), tc.field) {
					t.Fatalf("err %v, want validation_failed on %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("err %v", err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
