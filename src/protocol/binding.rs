//! The protocol bindings by the names the specification gives them (§5.3; the names agent
//! cards carry in `protocolBinding` and spans in `a2a.protocol.binding`), written once.
//! A backend speaks gRPC or HTTP+JSON (`Binding::backend`); clients reach the gateway over
//! the fronts a route enables (`fronts`), any of the three.

use std::fmt;

/// The JSON-RPC binding's name.
pub(crate) const JSONRPC: &str = Binding::JsonRpc.name();

/// A protocol binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    /// The JSON-RPC 2.0 binding (spec section 9): the gateway's front only.
    JsonRpc,
    /// The gRPC binding (spec section 10): `lf.a2a.v1.A2AService` over HTTP/2.
    Grpc,
    /// The HTTP+JSON binding (spec section 11): REST paths and ProtoJSON bodies.
    HttpJson,
}

impl Binding {
    /// Every binding.
    pub(crate) const ALL: [Binding; 3] = [Binding::JsonRpc, Binding::Grpc, Binding::HttpJson];

    /// The specification's name.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Binding::JsonRpc => "JSONRPC",
            Binding::Grpc => "GRPC",
            Binding::HttpJson => "HTTP+JSON",
        }
    }

    /// A binding as settings name it: the spec's name in any case, or `REST` for HTTP+JSON.
    pub(crate) fn from_name(text: &str) -> Result<Binding, String> {
        let alias = (text.eq_ignore_ascii_case("REST")).then_some(Binding::HttpJson);
        Binding::ALL
            .into_iter()
            .find(|b| b.name().eq_ignore_ascii_case(text))
            .or(alias)
            .ok_or_else(|| format!("{text:?} is not a binding (JSONRPC, GRPC or HTTP+JSON)"))
    }

    /// A binding a backend may speak (`--binding`): the gateway calls agents over gRPC or
    /// HTTP+JSON only.
    pub(crate) fn backend(text: &str) -> Result<Binding, String> {
        match Binding::from_name(text) {
            Ok(Binding::JsonRpc) | Err(_) => Err(format!(
                "{text:?} is not a backend binding (GRPC or HTTP+JSON)"
            )),
            Ok(binding) => Ok(binding),
        }
    }
}

impl fmt::Display for Binding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Binding {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Binding, D::Error> {
        let text = String::deserialize(d)?;
        Binding::from_name(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_binding_is_read_back_from_its_name_and_its_aliases() {
        for binding in Binding::ALL {
            assert_eq!(Binding::from_name(binding.name()), Ok(binding));
            let lower = binding.name().to_ascii_lowercase();
            assert_eq!(Binding::from_name(&lower), Ok(binding));
            let json = serde_json::json!(binding.name());
            assert_eq!(serde_json::from_value::<Binding>(json).unwrap(), binding);
        }
        assert_eq!(Binding::from_name("rest"), Ok(Binding::HttpJson));
        for bad in ["SOAP", ""] {
            assert!(Binding::from_name(bad).is_err(), "{bad}");
        }
        for bad in ["SOAP", "", "JSONRPC", "jsonrpc"] {
            assert!(Binding::backend(bad).is_err(), "{bad}");
        }
        assert_eq!(Binding::backend("rest"), Ok(Binding::HttpJson));
        assert_eq!(Binding::backend("GRPC"), Ok(Binding::Grpc));
    }
}
