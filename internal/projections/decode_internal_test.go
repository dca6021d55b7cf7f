package projections

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// randomFill sets every exported field of the struct v points to: strings (sometimes empty,
// so omitempty drops them), ints, bools, and attribute maps (sometimes nil or with empty lists).
func randomFill(r *rand.Rand, v any) {
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch f.Kind() {
		case reflect.String:
			if r.IntN(4) > 0 {
				f.SetString("s" + strconv.Itoa(r.IntN(1000)))
			}
		case reflect.Int64:
			f.SetInt(r.Int64N(1<<40) - 1<<20)
		case reflect.Bool:
			f.SetBool(r.IntN(2) == 0)
		case reflect.Map:
			if r.IntN(3) == 0 {
				continue
			}
			m := map[string][]string{}
			for k := range r.IntN(4) {
				vals := []string{}
				for range r.IntN(3) {
					vals = append(vals, "v"+strconv.Itoa(r.IntN(100)))
				}
				m["a"+strconv.Itoa(k)] = vals
			}
			f.Set(reflect.ValueOf(m))
		case reflect.Slice: // of structs: a user's former names
			if r.IntN(3) == 0 {
				continue
			}
			n := 1 + r.IntN(2)
			sl := reflect.MakeSlice(f.Type(), n, n)
			for j := range n {
				randomFill(r, sl.Index(j).Addr().Interface())
			}
			f.Set(sl)
		default:
			panic("randomFill: unhandled kind " + f.Kind().String())
		}
	}
}

// checkAgainstReflection decodes item with the hand-written decoder and with
// attributevalue, and fails unless both agree (value, or both an error).
func checkAgainstReflection[T any](t *testing.T, item Item, hand func(Item) (T, error)) {
	t.Helper()
	got, gotErr := hand(item)
	want, wantErr := decode[T](item, "x")
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("item %v: hand-written error %v, attributevalue error %v", item, gotErr, wantErr)
	}
	if gotErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("item %v:\nhand-written   %+v\nattributevalue %+v", item, got, want)
	}
}

func TestDecodersMatchAttributevalue(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 16))
	for range 500 {
		var u UserView
		randomFill(r, &u)
		item, err := marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		checkAgainstReflection(t, item, decodeUser)
		var g GroupView
		randomFill(r, &g)
		if item, err = marshal(g); err != nil {
			t.Fatal(err)
		}
		checkAgainstReflection(t, item, decodeGroup)
		var m MembershipView
		randomFill(r, &m)
		if item, err = marshal(m); err != nil {
			t.Fatal(err)
		}
		checkAgainstReflection(t, item, decodeMembership)
	}
}

func TestDecodersOddShapes(t *testing.T) {
	base := func() Item {
		item, err := attributevalue.MarshalMap(UserView{ID: "user#a", SK: "config", Username: "a", Version: 3,
			Attributes: map[string][]string{"k": {"x", "y"}}})
		if err != nil {
			t.Fatal(err)
		}
		return item
	}
	cases := map[string]func(Item){
		"null string": func(i Item) { i["email"] = &types.AttributeValueMemberNULL{Value: true} },
		"null number": func(i Item) { i["version"] = &types.AttributeValueMemberNULL{Value: true} },
		"string set": func(i Item) {
			i["attributes"] = &types.AttributeValueMemberM{Value: Item{"k": &types.AttributeValueMemberSS{Value: []string{"p", "q"}}}}
		},
		"unknown attribute":  func(i Item) { i["future"] = &types.AttributeValueMemberN{Value: "1"} },
		"number as string":   func(i Item) { i["version"] = &types.AttributeValueMemberS{Value: "3"} },
		"string as number":   func(i Item) { i["email"] = &types.AttributeValueMemberN{Value: "3"} },
		"bad number":         func(i Item) { i["version"] = &types.AttributeValueMemberN{Value: "3.5"} },
		"bool as string":     func(i Item) { i["is_active"] = &types.AttributeValueMemberS{Value: "true"} },
		"attributes as list": func(i Item) { i["attributes"] = &types.AttributeValueMemberL{} },
		"attribute value number": func(i Item) {
			i["attributes"] = &types.AttributeValueMemberM{Value: Item{"k": &types.AttributeValueMemberN{Value: "1"}}}
		},
		"attribute list of numbers": func(i Item) {
			i["attributes"] = &types.AttributeValueMemberM{Value: Item{"k": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: "1"}}}}}
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			item := base()
			change(item)
			checkAgainstReflection(t, item, decodeUser)
		})
	}
	t.Run("wrong types fail", func(t *testing.T) {
		item := base()
		item["version"] = &types.AttributeValueMemberS{Value: "3"}
		if _, err := DecodeUser(item); err == nil {
			t.Fatal("a string version decoded without an error")
		}
	})
}

// BenchmarkDecodeUser compares the hand-written decoder with attributevalue on a typical
// user item (README, Performance).
func BenchmarkDecodeUser(b *testing.B) {
	item, err := marshal(UserView{ID: "user#jdoe", SK: "config", Kind: "user", UserID: "0191b7d4-5c7e-7d1a-9f3e-2a1b3c4d5e6f",
		Username: "jdoe", Email: "jdoe@example.com", FirstName: "John", LastName: "Doe", IsActive: true,
		Attributes: map[string][]string{"department": {"sales"}, "phone": {"+1 555 0100"}}, Version: 7,
		CreatedAt: "2026-11-23T10:00:00.000000000Z", ConfigUpdatedAt: "2026-11-23T11:00:00.000000000Z",
		UpdatedAt: "2026-11-23T11:00:00.010000000Z", UpdatedSort: "2026-11-23T11:00:00.000000000Z#jdoe",
		LastNameSort: "doe#jdoe", FirstNameSort: "john#jdoe", NameSort: "jdoe"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("hand-written", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeUser(item); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("attributevalue", func(b *testing.B) {
		for b.Loop() {
			if _, err := decode[UserView](item, "user"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
