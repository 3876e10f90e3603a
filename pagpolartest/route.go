package pagpolartest

import (
	"net/http"
	"slices"
	"strings"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// route is a request's resolved route: its Fault.Route name and the
// identifier of its path, if any ({id} of subscribe and plan-change, of
// GET /sales/{identifier} and GET /subscriptions/{id}).
type route struct {
	name  string
	id    string
	money bool
}

// basePath prefixes every route: the client's base URL ends in "/v1".
const basePath = "/v1"

// resolve maps method and path to a route. It answers 404 for an unknown
// path and 405 (with the allowed methods) for a known path with another
// method.
func resolve(method, path string) (rt route, status int, allow string) {
	rest, ok := strings.CutPrefix(path, basePath)
	if !ok || !strings.HasPrefix(rest, "/") {
		return route{}, http.StatusNotFound, ""
	}
	seg := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	if slices.Contains(seg, "") { // "//" or a trailing slash: no route has one
		return route{}, http.StatusNotFound, ""
	}
	want := func(m string, r route) (route, int, string) {
		if method != m {
			return route{}, http.StatusMethodNotAllowed, m
		}
		return r, 0, ""
	}
	switch {
	case len(seg) == 2 && seg[0] == "payments":
		switch "/" + seg[0] + "/" + seg[1] {
		case wire.RoutePix:
			return want(http.MethodPost, route{name: routePix, money: true})
		case wire.RouteBoleto:
			return want(http.MethodPost, route{name: routeBoleto, money: true})
		case wire.RouteCreditCard:
			return want(http.MethodPost, route{name: routeCreditCard, money: true})
		}
	case len(seg) == 4 && seg[0] == "plans" && seg[1] == "offer" && seg[3] == "subscribe":
		return want(http.MethodPost, route{name: routeSubscribe, id: seg[2], money: true})
	case len(seg) == 3 && seg[0] == "subscriptions" && seg[2] == "plan-change":
		return want(http.MethodPost, route{name: routePlanChange, id: seg[1], money: true})
	case len(seg) == 1 && "/"+seg[0] == wire.RouteRefunds:
		switch method {
		case http.MethodPost:
			return route{name: routeRefund, money: true}, 0, ""
		case http.MethodGet:
			return route{name: routeGetRefunds}, 0, ""
		}
		return route{}, http.StatusMethodNotAllowed, "GET, POST"
	case len(seg) == 1 && "/"+seg[0] == wire.RouteSales:
		return want(http.MethodGet, route{name: routeGetSales})
	case len(seg) == 2 && seg[0] == "sales":
		return want(http.MethodGet, route{name: routeGetSale, id: seg[1]})
	case len(seg) == 1 && "/"+seg[0] == wire.RouteSubscriptions:
		return want(http.MethodGet, route{name: routeListSubscriptions})
	case len(seg) == 2 && seg[0] == "subscriptions":
		return want(http.MethodGet, route{name: routeGetSubscription, id: seg[1]})
	}
	return route{}, http.StatusNotFound, ""
}
