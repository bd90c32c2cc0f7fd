//! One budget per package for the code materializing decodes: the binaries
//! made fat for one package (one install change, one `pip sync` of a
//! distribution) may hold in all at most what its archives declare, or
//! what is allowed to archives that declare nothing, counted once. Each
//! use of a TOC entry counts, so many binaries sharing one marker cannot
//! multiply what was declared. Every binary is counted before the first
//! is written.

/// The code the binaries of a package would decode, past its budget.
#[derive(Debug, thiserror::Error)]
#[error(
    "{package}: its {binaries} split binaries would decode {needed} bytes of code in all, \
     more than the {limit} bytes {why}; refused"
)]
pub struct OverBudget {
    pub package: String,
    /// Bytes counted over every binary.
    pub needed: u64,
    /// Binaries counted.
    pub binaries: usize,
    pub limit: u64,
    pub why: String,
}

/// What the binaries materialized for one package may still decode.
#[derive(Debug)]
pub(crate) struct DecodeBudget {
    package: String,
    limit: u64,
    why: String,
    spent: u64,
    binaries: usize,
}

impl DecodeBudget {
    /// A budget of `limit` bytes for `package`; `why` says where it comes
    /// from ("its archives declare").
    pub(crate) fn new(
        package: impl Into<String>,
        limit: u64,
        why: impl Into<String>,
    ) -> DecodeBudget {
        DecodeBudget {
            package: package.into(),
            limit,
            why: why.into(),
            spent: 0,
            binaries: 0,
        }
    }

    /// Counts one binary decoding `bytes`.
    pub(crate) fn add(&mut self, bytes: u64) {
        self.spent = self.spent.saturating_add(bytes);
        self.binaries += 1;
    }

    /// Whether what was counted is within the budget; refused past it.
    pub(crate) fn check(&self) -> Result<(), OverBudget> {
        if self.spent <= self.limit {
            return Ok(());
        }
        Err(OverBudget {
            package: self.package.clone(),
            needed: self.spent,
            binaries: self.binaries,
            limit: self.limit,
            why: self.why.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_of_one_binary_spend_one_budget() {
        let mut budget = DecodeBudget::new("demo", 100, "its archives declare");
        budget.add(40);
        budget.add(60);
        budget.check().unwrap();
        budget.add(1);
        let error = budget.check().unwrap_err();
        assert_eq!((error.needed, error.binaries), (101, 3));
        let text = error.to_string();
        assert!(text.starts_with("demo: its 3 split binaries"), "{text}");
    }
}
