//! [`KeyIndex`]: which keys a table holds, known without reading its rows.
//!
//! Each data file's key column carries a Parquet bloom filter (written by
//! [`writer_properties`]): the index has one filter per row group, read
//! from the file's footer when the file first appears in the log. A key no
//! filter holds is new for certain; a key a filter may hold is checked
//! against that row group's key column, read then. So a load costs what it
//! loads (its keys' probes, and the row groups they hit), not what the
//! table holds.
//!
//! The filters are held in memory up to the process's budget of them
//! ([`budget`]); past it, the index keeps where each file stores its
//! filters and reads them again at each probe, so memory does not grow
//! with the table.
//!
//! A file another tool wrote (an OPTIMIZE that rewrote the table, say) may
//! have no filter: its key column is read once and a filter built from it,
//! held whatever the budget.

use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::DataType as ArrowType;
use deltalake::logstore::parquet_reader::ParquetObjectReader;
use deltalake::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, RowSelection, RowSelector,
};
use deltalake::parquet::arrow::async_reader::{
    ParquetRecordBatchStream, ParquetRecordBatchStreamBuilder,
};
use deltalake::parquet::arrow::ProjectionMask;
use deltalake::parquet::basic::{Compression, ZstdLevel};
use deltalake::parquet::bloom_filter::Sbbf;
use deltalake::parquet::errors::ParquetError;
use deltalake::parquet::file::metadata::{PageIndexPolicy, ParquetMetaData};
use deltalake::parquet::file::properties::{EnabledStatistics, WriterProperties};
use deltalake::parquet::schema::types::ColumnPath;
use deltalake::{ObjectStore, Path};
use etl_core::content::typed::loader;
use etl_core::EtlError;
use futures_util::{StreamExt, TryStreamExt};
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use crate::errors::from_parquet;
use crate::filter::{KeyFilter, KeyHash};

mod budget;
use budget::{Budget, Taken};

/// The false-positive rate of a file's filter: a key probed against a
/// thousand files hits a row group it is not in about once in a hundred
/// probes, and a filter costs about four bytes a key.
pub(crate) const FPP: f64 = 1e-5;

/// The lower false-positive rate of the filters every page of a run probes
/// all its keys against, where a hit on a file that holds none of them (a
/// read of that file's keys, and a wait on the store) is on the page's
/// path: at [`FPP`], 1,000 keys against 150 files hit one or two such
/// files a page. It costs eight bytes a key instead of four, so only these
/// filters have it:
/// - the one this writer keeps in memory of a file it wrote itself
///   ([`KeyIndex::add_written`]; a run's pages are looked up against every
///   file the run wrote before);
/// - a merge table's ([`crate::columns::Columns::key_filter`]), each
///   file's own and those built of a file without one (compacted by
///   another tool): each page of a merge reads the rows of its primary
///   keys, from files other runs wrote. A child table's stay at `FPP`: they are looked in
///   beside the load, for the child rows of replaced versions, and a
///   merge opens them with all their filters.
pub(crate) const LOW_FPP: f64 = 1e-7;

/// The most rows of a file written without a page index
/// ([`writer_properties`]): a load of a page or a few, whose columns come
/// to a data page or two each (Parquet's pages hold up to 1 MB).
const ONE_PAGE_ROWS: usize = 4_096;

/// The most rows a row group of a load's file holds: a reader (a merge
/// rewriting a file it takes a row out of, [`rows_in_slices`]) and this
/// writer hold this many rows' columns at a time, so a file of a large
/// load costs a row group of memory, not the file.
pub(crate) const ROW_GROUP: usize = 16_384;

/// The most rows a row group of a file a merge writes again (without the
/// rows it takes out) holds. Smaller than a load's: the writer holds its
/// row group encoded twice as it flushes it, and a merge does so beside
/// the key filters of every table its page touches, to take out a few rows
/// of a large file. A file written again has a filter per group, four
/// times as many as a load's file of its rows: few files are rewritten.
pub(crate) const REWRITE_GROUP: usize = 4_096;

/// How many files' footers (or key columns) are read at once when many
/// are wanted (object storage answers each in a round trip).
pub(crate) const READ_AHEAD: usize = 16;

/// A data file of the table, as the log lists it.
#[derive(Clone, Debug)]
pub(crate) struct DataFile {
    /// Its path below the table's root.
    pub path: Path,
    /// Its size in bytes.
    pub size: u64,
}

/// The filters of one file.
#[derive(Debug)]
struct FileKeys {
    size: u64,
    filters: Filters,
    /// Whether this writer wrote it.
    own: bool,
}

/// Where one file's filters are.
#[derive(Debug)]
enum Filters {
    /// In memory, held against the index's [`Budget`]: one per row group
    /// (`Some(i)`), or one for the whole file (`None`: a file this process
    /// wrote, whose keys it knew).
    Held {
        groups: Vec<(Option<usize>, KeyFilter)>,
        _taken: Taken,
    },
    /// In the file, the budget spent: each row group's filter's bytes
    /// (its header and bitset), read again at each probe.
    Stored(Vec<(usize, Range<u64>)>),
    /// Not read yet: a file this process wrote once the budget was spent.
    /// Its footer is read at the first probe that looks in it.
    Unread,
}

/// A file's row group (`Some(i)`), or the whole file (`None`): what one
/// filter covers.
type Group = (Path, Option<usize>);

/// The keys of a table's live files, as bloom filters.
#[derive(Debug)]
pub(crate) struct KeyIndex {
    files: HashMap<Path, FileKeys>,
    /// The key column, and the rate of a filter built of a file without
    /// one ([`crate::columns::Columns::key_filter`]).
    key: (String, f64),
    budget: Arc<Budget>,
}

/// Parquet properties for a file of `rows` entries whose key column is
/// `key`, in row groups of at most `group` rows ([`ROW_GROUP`] or
/// [`REWRITE_GROUP`]): a bloom filter on the key at the false-positive
/// rate `fpp` ([`FPP`] or [`LOW_FPP`]), sized for those entries (a row
/// group's worth at most: each row group has its own), and no
/// dictionary, since a table holds each key once (a dictionary of
/// distinct values only hashes each one and stores the column twice). The
/// column `text`, each entry's JSON text, is written plain for the same
/// reason, and without statistics: no reader skips files by the least and
/// greatest of a JSON text. A typed table's `_etl_key` is written plain
/// where it is not the key column too (a merge table's key column is
/// `_etl_id`): it is each row's own content key. A child table's
/// `_etl_parent_key` and `_etl_root_key` are written plain as well:
/// content keys, each repeated only across one record's list elements,
/// which the codec finds side by side as well as a dictionary would,
/// without hashing every value.
///
/// A file of at most [`ONE_PAGE_ROWS`] rows gets statistics per column
/// chunk only, not per page: its columns are a page or two each, so a page
/// index would repeat what the chunk's statistics (and the Delta log's,
/// made from them) say, and computing it is a few percent of a typed
/// load's CPU.
/// Every data file's codec: ZSTD at level 1. Half the bytes of Snappy for
/// our files (a content key is 64 hex digits, which Snappy barely
/// shrinks), at a small cost in CPU; readers on object storage pay for
/// every byte. Every Delta reader reads it.
fn codec() -> Compression {
    Compression::ZSTD(ZstdLevel::try_new(1).unwrap_or_default())
}

pub(crate) fn writer_properties(
    (key, fpp): (&str, f64),
    text: Option<&str>,
    (rows, group): (usize, usize),
) -> WriterProperties {
    let column = ColumnPath::from(key);
    let mut properties = WriterProperties::builder()
        .set_compression(codec())
        .set_max_row_group_row_count(Some(group))
        .set_column_dictionary_enabled(column.clone(), false)
        .set_column_bloom_filter_enabled(column.clone(), true)
        .set_column_bloom_filter_fpp(column.clone(), fpp)
        .set_column_bloom_filter_max_ndv(column, rows.clamp(1, group) as u64);
    for keys in [loader::KEY, loader::PARENT_KEY, loader::ROOT_KEY] {
        properties = properties.set_column_dictionary_enabled(ColumnPath::from(keys), false);
    }
    if rows <= ONE_PAGE_ROWS {
        properties = properties.set_statistics_enabled(EnabledStatistics::Chunk);
    }
    if let Some(text) = text {
        let text = ColumnPath::from(text);
        properties = properties
            .set_column_dictionary_enabled(text.clone(), false)
            .set_column_statistics_enabled(text, EnabledStatistics::None);
    }
    properties.build()
}

impl KeyIndex {
    /// An empty index of the key column `key` (and the rate of a filter
    /// built of a file without one), its filters held against the
    /// process's [`Budget`] (an error where the variable that sets it does
    /// not read).
    pub fn new(key: (&str, f64)) -> Result<Self, EtlError> {
        Ok(KeyIndex::within(key, Budget::process()?))
    }

    /// An empty index whose filters are held against `budget`.
    fn within((key, fpp): (&str, f64), budget: Arc<Budget>) -> Self {
        KeyIndex {
            files: HashMap::new(),
            key: (key.to_owned(), fpp),
            budget,
        }
    }

    /// Brings the index to `live`, the table's files now: files gone from
    /// the log (compacted away, say) are forgotten, new ones read.
    pub async fn sync(
        &mut self,
        store: &Arc<dyn ObjectStore>,
        live: Vec<DataFile>,
        location: &str,
    ) -> Result<(), EtlError> {
        let live_paths: HashSet<&Path> = live.iter().map(|f| &f.path).collect();
        self.files.retain(|path, _| live_paths.contains(path));
        self.add(store, live, location).await
    }

    /// Reads the filters of the files of `added` the index does not know.
    pub async fn add(
        &mut self,
        store: &Arc<dyn ObjectStore>,
        added: Vec<DataFile>,
        location: &str,
    ) -> Result<(), EtlError> {
        let new: Vec<DataFile> = added
            .into_iter()
            .filter(|f| !self.files.contains_key(&f.path))
            .collect();
        let (key, budget) = ((self.key.0.as_str(), self.key.1), &self.budget);
        let read: Vec<(Path, FileKeys)> = futures_util::stream::iter(new)
            .map(|file| async move {
                let filters = read_filters(store, &file, key, budget, location).await?;
                let keys = FileKeys {
                    size: file.size,
                    filters,
                    own: false,
                };
                Ok::<_, EtlError>((file.path, keys))
            })
            .buffer_unordered(READ_AHEAD)
            .try_collect()
            .await?;
        self.files.extend(read);
        Ok(())
    }

    /// Forgets the files of `removed` (compacted away, say: their rows are
    /// in the files that replaced them).
    pub fn remove(&mut self, removed: &[Path]) {
        for path in removed {
            self.files.remove(path);
        }
    }

    /// Records the file this process just committed, with the keys it
    /// holds: a filter of them where the budget has room, else the file's
    /// own filters, read when a probe first looks in it.
    pub fn add_written(&mut self, file: DataFile, keys: &[&str]) {
        let mut filter = filter_for(keys.len(), LOW_FPP);
        for key in keys {
            filter.insert(*key);
        }
        let filter = KeyFilter::new(&filter);
        let filters = match self.budget.take(filter.bytes()) {
            Some(taken) => Filters::Held {
                groups: vec![(None, filter)],
                _taken: taken,
            },
            None => Filters::Unread,
        };
        self.files.insert(
            file.path,
            FileKeys {
                size: file.size,
                filters,
                own: true,
            },
        );
    }

    /// For each of `keys`, whether the table holds it: the filters first,
    /// then the key column of each row group a filter may hold it in. With
    /// `others_only`, only the files other writers wrote are looked in (the
    /// caller knows this writer never wrote any of `keys`).
    pub async fn held(
        &mut self,
        store: &Arc<dyn ObjectStore>,
        keys: &[String],
        location: &str,
        others_only: bool,
    ) -> Result<Vec<bool>, EtlError> {
        let mut held = vec![false; keys.len()];
        let probes = self.probes(store, keys, location, others_only).await?;
        for ((path, group), wanted) in probes {
            if wanted.iter().all(|&i| held[i]) {
                continue;
            }
            let asked: Vec<&str> = wanted.iter().map(|&i| keys[i].as_str()).collect();
            let file = self.file(&path);
            let found = find_keys(store, &file, group, (&self.key.0, &asked), location).await?;
            for (i, found) in wanted.into_iter().zip(found) {
                held[i] |= found;
            }
        }
        Ok(held)
    }

    /// The files whose filters may hold any of `keys` (a merge's rows to
    /// weigh, and perhaps rewrite): the caller reads their keys anyway,
    /// so a hit is not confirmed here.
    pub async fn may_hold(
        &mut self,
        store: &Arc<dyn ObjectStore>,
        keys: &[String],
        location: &str,
    ) -> Result<Vec<DataFile>, EtlError> {
        let probes = self.probes(store, keys, location, false).await?;
        let paths: HashSet<Path> = probes.into_keys().map(|(path, _)| path).collect();
        Ok(paths.iter().map(|path| self.file(path)).collect())
    }

    /// (file, row group) -> the indexes of `keys` its filter may hold:
    /// the held filters probed in memory, the stored ones read
    /// [`READ_AHEAD`] row groups at a time and dropped once probed.
    async fn probes(
        &mut self,
        store: &Arc<dyn ObjectStore>,
        keys: &[String],
        location: &str,
        others_only: bool,
    ) -> Result<HashMap<Group, Vec<usize>>, EtlError> {
        let looked = |file: &FileKeys| !(others_only && file.own);
        self.read_unread(store, location, looked).await?;
        // Each key hashed once for every filter; a filter probed for every
        // key while it is in cache.
        let hashes: Vec<KeyHash> = keys.iter().map(|k| KeyHash::of(k)).collect();
        let mut probes: HashMap<Group, Vec<usize>> = HashMap::new();
        let mut stored = Vec::new();
        for (path, file) in self.files.iter().filter(|(_, file)| looked(file)) {
            match &file.filters {
                Filters::Held { groups, .. } => {
                    for (group, filter) in groups {
                        let hits = hits(filter, &hashes);
                        if !hits.is_empty() {
                            probes.insert((path.clone(), *group), hits);
                        }
                    }
                }
                Filters::Stored(ranges) => {
                    let of_file = ranges.iter().map(|(g, r)| (path.clone(), *g, r.clone()));
                    stored.extend(of_file);
                }
                Filters::Unread => {
                    return Err(EtlError::InvalidInput(format!(
                        "Delta table {location}: the key filters of {path} were not read"
                    )))
                }
            }
        }
        let hashes = &hashes;
        let read: Vec<(Group, Vec<usize>)> = futures_util::stream::iter(stored)
            .map(|(path, group, range)| async move {
                let filters = read_stored(store, &path, &[range], location).await?;
                let hits = filters.iter().flat_map(|f| hits(f, hashes)).collect();
                Ok::<_, EtlError>(((path, Some(group)), hits))
            })
            .buffer_unordered(READ_AHEAD)
            .try_collect()
            .await?;
        probes.extend(read.into_iter().filter(|(_, hits)| !hits.is_empty()));
        Ok(probes)
    }

    /// Reads the footers of the [`Filters::Unread`] files a probe will look
    /// in (`looked`), holding their filters where the budget has room.
    async fn read_unread(
        &mut self,
        store: &Arc<dyn ObjectStore>,
        location: &str,
        looked: impl Fn(&FileKeys) -> bool,
    ) -> Result<(), EtlError> {
        let unread: Vec<DataFile> = self
            .files
            .iter()
            .filter(|(_, file)| looked(file) && matches!(file.filters, Filters::Unread))
            .map(|(path, _)| self.file(path))
            .collect();
        let (key, budget) = ((self.key.0.as_str(), self.key.1), &self.budget);
        let read: Vec<(Path, Filters)> = futures_util::stream::iter(unread)
            .map(|file| async move {
                let filters = read_filters(store, &file, key, budget, location).await?;
                Ok::<_, EtlError>((file.path, filters))
            })
            .buffer_unordered(READ_AHEAD)
            .try_collect()
            .await?;
        for (path, filters) in read {
            if let Some(file) = self.files.get_mut(&path) {
                file.filters = filters;
            }
        }
        Ok(())
    }

    /// The live file at `path`, as the index knows it.
    fn file(&self, path: &Path) -> DataFile {
        DataFile {
            path: path.clone(),
            size: self.files.get(path).map_or(0, |file| file.size),
        }
    }
}

/// The indexes of the keys of `hashes` that `filter` may hold.
fn hits(filter: &KeyFilter, hashes: &[KeyHash]) -> Vec<usize> {
    (0..hashes.len())
        .filter(|&i| filter.may_hold(hashes[i]))
        .collect()
}

/// An empty filter sized for `n` keys at `fpp`.
fn filter_for(n: usize, fpp: f64) -> Sbbf {
    Sbbf::new_with_ndv_fpp(n.max(1) as u64, fpp)
        .unwrap_or_else(|_| Sbbf::new_with_num_of_bytes(1 << 20))
}

/// The column index of `key` among the file's leaves.
fn key_leaf(
    builder: &ParquetRecordBatchStreamBuilder<ParquetObjectReader>,
    key: &str,
    file: &DataFile,
    location: &str,
) -> Result<usize, EtlError> {
    builder
        .parquet_schema()
        .columns()
        .iter()
        .position(|c| c.name() == key)
        .ok_or_else(|| {
            EtlError::InvalidInput(format!(
                "Delta table {location}: data file {} has no `{key}` column",
                file.path
            ))
        })
}

/// A reader of `file` in `store`, its size known (no request to learn it).
fn reader_of(store: &Arc<dyn ObjectStore>, file: &DataFile) -> ParquetObjectReader {
    ParquetObjectReader::new(Arc::clone(store), file.path.clone()).with_file_size(file.size)
}

async fn open_file(
    store: &Arc<dyn ObjectStore>,
    file: &DataFile,
    location: &str,
) -> Result<ParquetRecordBatchStreamBuilder<ParquetObjectReader>, EtlError> {
    ParquetRecordBatchStreamBuilder::new(reader_of(store, file))
        .await
        .map_err(|e| from_parquet(e, file.path.as_ref(), location))
}

/// Reads one file's filters, held against `budget` where they fit, else
/// left in the file with where each is ([`Filters::Stored`]). A file
/// whose filters' places its footer does not give (a writer that records
/// no length), or that has none, has them held whatever the budget: each
/// row group's own read through its footer, or one built from the row
/// group's key column `key` at the rate `fpp`.
async fn read_filters(
    store: &Arc<dyn ObjectStore>,
    file: &DataFile,
    (key, fpp): (&str, f64),
    budget: &Arc<Budget>,
    location: &str,
) -> Result<Filters, EtlError> {
    let mut builder = open_file(store, file, location).await?;
    let leaf = key_leaf(&builder, key, file, location)?;
    if let Some(ranges) = stored_ranges(builder.metadata(), leaf) {
        let bytes = ranges.iter().map(|(_, r)| r.end - r.start).sum::<u64>();
        let Some(taken) = budget.take(usize::try_from(bytes).unwrap_or(usize::MAX)) else {
            return Ok(Filters::Stored(ranges));
        };
        let (groups, ranges): (Vec<usize>, Vec<Range<u64>>) = ranges.into_iter().unzip();
        let filters = read_stored(store, &file.path, &ranges, location).await?;
        let groups = groups.into_iter().map(Some).zip(filters).collect();
        return Ok(Filters::Held {
            groups,
            _taken: taken,
        });
    }
    let mut groups = Vec::new();
    for group in 0..builder.metadata().num_row_groups() {
        let stored = builder
            .get_row_group_column_bloom_filter(group, leaf)
            .await
            .map_err(|e| from_parquet(e, file.path.as_ref(), location))?;
        let filter = match stored {
            Some(filter) => filter,
            None => {
                // Sized by the group's rows, so its keys go straight in.
                let rows = builder.metadata().row_group(group).num_rows();
                let mut filter = filter_for(usize::try_from(rows).unwrap_or(0), fpp);
                scan_keys(store, file, Some(group), key, location, |k| {
                    filter.insert(k);
                })
                .await?;
                filter
            }
        };
        groups.push((Some(group), KeyFilter::new(&filter)));
    }
    let bytes = groups.iter().map(|(_, f)| f.bytes()).sum();
    Ok(Filters::Held {
        groups,
        _taken: budget.force(bytes),
    })
}

/// Each row group's filter of the column `leaf` as the footer places it
/// (offset and length), or `None` where a row group's is not placed so.
fn stored_ranges(metadata: &ParquetMetaData, leaf: usize) -> Option<Vec<(usize, Range<u64>)>> {
    metadata
        .row_groups()
        .iter()
        .enumerate()
        .map(|(group, meta)| {
            let column = meta.column(leaf);
            let start = u64::try_from(column.bloom_filter_offset()?).ok()?;
            let length = u64::try_from(column.bloom_filter_length()?).ok()?;
            Some((group, start..start.checked_add(length)?))
        })
        .collect()
}

/// The filters stored at `ranges` of the file at `path`, fetched in one
/// call (object storage merges near ranges into one request).
async fn read_stored(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
    ranges: &[Range<u64>],
    location: &str,
) -> Result<Vec<KeyFilter>, EtlError> {
    let fail = |e| from_parquet(e, path.as_ref(), location);
    let stored = store
        .get_ranges(path, ranges)
        .await
        .map_err(|e| fail(ParquetError::External(Box::new(e))))?;
    stored
        .iter()
        .map(|bytes| KeyFilter::from_stored(bytes).map_err(fail))
        .collect()
}

/// Every row's `text` column and `time` column (a timestamp, in
/// microseconds; `None` for null) in one file: what a scan of the rows
/// themselves needs (a child's cursor by parent).
pub(crate) async fn read_text_and_time(
    store: &Arc<dyn ObjectStore>,
    file: &DataFile,
    (text, time): (&str, &str),
    location: &str,
) -> Result<Vec<(String, Option<i64>)>, EtlError> {
    let builder = open_file(store, file, location).await?;
    let leaves = [
        key_leaf(&builder, text, file, location)?,
        key_leaf(&builder, time, file, location)?,
    ];
    let mask = ProjectionMask::leaves(builder.parquet_schema(), leaves);
    let fail = |e| from_parquet(e, file.path.as_ref(), location);
    let mut stream = builder.with_projection(mask).build().map_err(fail)?;
    let not_a = |what: &str, e: &dyn std::fmt::Display| unreadable(location, file, what, e);
    let mut rows = Vec::new();
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(fail)?;
        let texts = batch
            .column_by_name(text)
            .ok_or_else(|| not_a(text, &"missing"))?;
        let texts = cast(texts, &ArrowType::Utf8).map_err(|e| not_a(text, &e))?;
        let texts = texts.as_string::<i32>();
        let times = batch
            .column_by_name(time)
            .ok_or_else(|| not_a(time, &"missing"))?;
        let times = cast(times, &ArrowType::Int64).map_err(|e| not_a(time, &e))?;
        let times = times.as_primitive::<deltalake::arrow::datatypes::Int64Type>();
        for i in 0..batch.num_rows() {
            if texts.is_valid(i) {
                let at = times.is_valid(i).then(|| times.value(i));
                rows.push((texts.value(i).to_owned(), at));
            }
        }
    }
    Ok(rows)
}

/// Every row of one file, `columns` of it, as a stream of batches that
/// owns its reader: a merge reads a file's keys whole.
pub(crate) async fn rows_of(
    store: &Arc<dyn ObjectStore>,
    file: &DataFile,
    columns: &[&str],
    location: &str,
) -> Result<ParquetRecordBatchStream<ParquetObjectReader>, EtlError> {
    let fail = |e| from_parquet(e, file.path.as_ref(), location);
    let builder = open_file(store, file, location).await?;
    let leaves = columns
        .iter()
        .map(|c| key_leaf(&builder, c, file, location))
        .collect::<Result<Vec<_>, _>>()?;
    let mask = ProjectionMask::leaves(builder.parquet_schema(), leaves);
    builder.with_projection(mask).build().map_err(fail)
}

/// Every column of the rows of `file`, in the file's order, read at most
/// [`ROW_GROUP`] rows at a time whatever its row groups hold: a file
/// written again (a merge's copy-on-write) holds no more of itself in
/// memory at once than a load's row group, even where a compaction wrote
/// it as one group of a million rows. The offset index (our writer's
/// files have one, as most writers' do) lets each slice fetch and decode
/// only its own pages; a reader otherwise fetches a whole row group's
/// columns at once. A file without an offset index is read a row group at
/// a time.
pub(crate) async fn rows_in_slices(
    store: &Arc<dyn ObjectStore>,
    file: &DataFile,
    location: &str,
) -> Result<
    impl futures_util::Stream<Item = Result<RecordBatch, ParquetError>> + Send + 'static,
    EtlError,
> {
    let mut reader = reader_of(store, file);
    let options = ArrowReaderOptions::new().with_offset_index_policy(PageIndexPolicy::Optional);
    let metadata = ArrowReaderMetadata::load_async(&mut reader, options)
        .await
        .map_err(|e| from_parquet(e, file.path.as_ref(), location))?;
    let slice = match metadata.metadata().offset_index() {
        Some(_) => ROW_GROUP,
        None => usize::MAX,
    };
    let mut slices = Vec::new();
    for (group, meta) in metadata.metadata().row_groups().iter().enumerate() {
        // A negative count (a damaged footer) would read as no rows, and
        // a rewrite would lose the group's: refused instead.
        let rows = usize::try_from(meta.num_rows()).map_err(|e| {
            unreadable(
                location,
                file,
                &format!("row group {group}'s row count"),
                &e,
            )
        })?;
        let starts = (0..rows).step_by(slice);
        slices.extend(starts.map(|start| (group, slice_of(rows, start, slice))));
    }
    Ok(futures_util::stream::iter(slices)
        .map(move |(group, selection)| {
            let builder = ParquetRecordBatchStreamBuilder::new_with_metadata(
                reader.clone(),
                metadata.clone(),
            )
            .with_row_groups(vec![group]);
            match selection {
                Some(selection) => builder.with_row_selection(selection),
                None => builder,
            }
            .build()
        })
        .try_flatten())
}

/// The selection of at most `slice` rows from `start` of a row group of
/// `rows`; `None` (no selection) where that is the whole group, which a
/// reader then fetches a column at a time rather than a page at a time.
fn slice_of(rows: usize, start: usize, slice: usize) -> Option<RowSelection> {
    let len = slice.min(rows - start);
    if len == rows {
        return None;
    }
    let selectors = [
        RowSelector::skip(start),
        RowSelector::select(len),
        RowSelector::skip(rows - start - len),
    ];
    Some(selectors.into_iter().filter(|s| s.row_count > 0).collect())
}

/// The `text` column of the row whose `time` column (a timestamp) is the
/// file's greatest, the first of equals; `None` when no row has a time.
/// The times are read first, then that one row of the text: a large file
/// (a compacted one) costs its time column and the text's page holding
/// the row, not its whole text column.
pub(crate) async fn text_of_newest(
    store: &Arc<dyn ObjectStore>,
    file: &DataFile,
    (text, time): (&str, &str),
    location: &str,
) -> Result<Option<String>, EtlError> {
    let fail = |e| from_parquet(e, file.path.as_ref(), location);
    let not_a = |what: &str, e: &dyn std::fmt::Display| unreadable(location, file, what, e);
    let builder = open_file(store, file, location).await?;
    let mask = ProjectionMask::leaves(
        builder.parquet_schema(),
        [key_leaf(&builder, time, file, location)?],
    );
    let mut stream = builder.with_projection(mask).build().map_err(fail)?;
    let (mut newest, mut row) = (None::<(i64, usize)>, 0);
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(fail)?;
        let times = cast(batch.column(0), &ArrowType::Int64).map_err(|e| not_a(time, &e))?;
        let times = times.as_primitive::<deltalake::arrow::datatypes::Int64Type>();
        for i in (0..batch.num_rows()).filter(|&i| times.is_valid(i)) {
            if newest.is_none_or(|(at, _)| times.value(i) > at) {
                newest = Some((times.value(i), row + i));
            }
        }
        row += batch.num_rows();
    }
    let Some((_, row)) = newest else {
        return Ok(None);
    };
    // The offset index (where a file has one: our writer's do) lets the
    // selection skip the pages before the row.
    let options = ArrowReaderOptions::new().with_offset_index_policy(PageIndexPolicy::Optional);
    let builder =
        ParquetRecordBatchStreamBuilder::new_with_options(reader_of(store, file), options)
            .await
            .map_err(fail)?;
    let mask = ProjectionMask::leaves(
        builder.parquet_schema(),
        [key_leaf(&builder, text, file, location)?],
    );
    let one = RowSelection::from(vec![RowSelector::skip(row), RowSelector::select(1)]);
    let mut stream = builder
        .with_projection(mask)
        .with_row_selection(one)
        .build()
        .map_err(fail)?;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(fail)?;
        if batch.num_rows() > 0 {
            let texts = cast(batch.column(0), &ArrowType::Utf8).map_err(|e| not_a(text, &e))?;
            let texts = texts.as_string::<i32>();
            return Ok(texts.is_valid(0).then(|| texts.value(0).to_owned()));
        }
    }
    Ok(None)
}

/// The error of a column `what` of `file` that does not read as its type.
fn unreadable(location: &str, file: &DataFile, what: &str, e: &dyn std::fmt::Display) -> EtlError {
    EtlError::InvalidInput(format!(
        "Delta table {location}: `{what}` of {} does not read: {e}",
        file.path
    ))
}

/// For each of `asked` (a probe's few hits), whether one row group of a
/// file (`None`: every row group) stores it: its key column scanned and
/// compared, nothing kept.
async fn find_keys(
    store: &Arc<dyn ObjectStore>,
    file: &DataFile,
    group: Option<usize>,
    (key, asked): (&str, &[&str]),
    location: &str,
) -> Result<Vec<bool>, EtlError> {
    let mut found = vec![false; asked.len()];
    scan_keys(store, file, group, key, location, |k| {
        for (i, a) in asked.iter().enumerate() {
            found[i] |= *a == k;
        }
    })
    .await?;
    Ok(found)
}

/// Calls `each` with every key stored in one row group of a file (`None`:
/// every row group).
async fn scan_keys(
    store: &Arc<dyn ObjectStore>,
    file: &DataFile,
    group: Option<usize>,
    key: &str,
    location: &str,
    mut each: impl FnMut(&str),
) -> Result<(), EtlError> {
    let builder = open_file(store, file, location).await?;
    let leaf = key_leaf(&builder, key, file, location)?;
    let mask = ProjectionMask::leaves(builder.parquet_schema(), [leaf]);
    let mut builder = builder.with_projection(mask);
    if let Some(group) = group {
        builder = builder.with_row_groups(vec![group]);
    }
    let fail = |e| from_parquet(e, file.path.as_ref(), location);
    let mut stream = builder.build().map_err(fail)?;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(fail)?;
        // Whatever string type the writer chose (Utf8, LargeUtf8, Utf8View).
        let column = cast(batch.column(0), &ArrowType::Utf8).map_err(|e| {
            EtlError::InvalidInput(format!(
                "Delta table {location}: `{key}` of {} is not text: {e}",
                file.path
            ))
        })?;
        let column = column.as_string::<i32>();
        (0..column.len())
            .filter(|&i| column.is_valid(i))
            .for_each(|i| each(column.value(i)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{RecordBatch, StringArray};
    use deltalake::arrow::datatypes::{Field, Schema};
    use deltalake::parquet::arrow::ArrowWriter;
    use deltalake::parquet::file::reader::{FileReader, SerializedFileReader};

    #[test]
    fn the_key_and_text_columns_are_written_plain_and_the_key_with_its_filter() {
        let n = 1_000;
        let keys: Vec<String> = (0..n).map(|i| format!("key-{i}")).collect();
        let texts: Vec<String> = (0..n).map(|i| format!(r#"{{"n":{i}}}"#)).collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", ArrowType::Utf8, false),
            Field::new("row", ArrowType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(keys)),
                Arc::new(StringArray::from(texts)),
            ],
        )
        .unwrap();
        let file = tempfile::tempfile().unwrap();
        let properties = writer_properties(("k", FPP), Some("row"), (n, ROW_GROUP));
        let into = file.try_clone().unwrap();
        let mut writer = ArrowWriter::try_new(into, schema, Some(properties)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();

        let reader = SerializedFileReader::new(file).unwrap();
        let group = reader.metadata().row_group(0);
        let (key, text) = (group.column(0), group.column(1));
        assert!(key.bloom_filter_offset().is_some(), "the key's filter");
        assert!(key.statistics().is_some(), "the key's least and greatest");
        assert!(key.dictionary_page_offset().is_none(), "no dictionary");
        assert!(text.statistics().is_none(), "no least and greatest text");
        assert!(text.dictionary_page_offset().is_none(), "no dictionary");
        // A page's load: the chunk's statistics, no page index.
        assert!(key.column_index_offset().is_none(), "no page index");
        for column in [key, text] {
            assert!(
                matches!(column.compression(), Compression::ZSTD(level) if level.compression_level() == 1),
                "{:?}",
                column.compression()
            );
        }
    }

    #[test]
    fn only_a_file_of_many_rows_gets_statistics_per_page() {
        let k = ColumnPath::from("k");
        let small = writer_properties(("k", FPP), None, (ONE_PAGE_ROWS, ROW_GROUP));
        let large = writer_properties(("k", FPP), None, (ONE_PAGE_ROWS + 1, ROW_GROUP));
        assert_eq!(small.statistics_enabled(&k), EnabledStatistics::Chunk);
        assert_eq!(large.statistics_enabled(&k), EnabledStatistics::Page);
    }

    #[test]
    fn every_key_column_gets_no_dictionary() {
        // A merge table's key column is `_etl_id`; its `_etl_key` is still
        // a content key, one a row.
        let properties = writer_properties((loader::ID, LOW_FPP), None, (ONE_PAGE_ROWS, ROW_GROUP));
        for plain in [
            loader::KEY,
            loader::PARENT_KEY,
            loader::ROOT_KEY,
            loader::ID,
        ] {
            assert!(
                !properties.dictionary_enabled(&ColumnPath::from(plain)),
                "{plain}"
            );
        }
        // A data column keeps Parquet's default.
        assert!(properties.dictionary_enabled(&ColumnPath::from("state")));
    }

    /// An index of the column `key` whose budget holds every filter.
    fn unbounded(key: (&str, f64)) -> KeyIndex {
        KeyIndex::within(key, Arc::new(Budget::new(usize::MAX)))
    }

    /// The number of hits of each probe of `keys` (false ones too).
    async fn hits(index: &mut KeyIndex, store: &Arc<dyn ObjectStore>, keys: &[String]) -> usize {
        let probes = index.probes(store, keys, "t", false).await.unwrap();
        probes.values().map(Vec::len).sum()
    }

    #[tokio::test]
    async fn a_file_this_process_wrote_is_probed_at_its_own_lower_rate() {
        let held: Vec<String> = (0..1_000).map(|i| format!("held-{i}")).collect();
        let mut index = unbounded(("k", FPP));
        let store = memory();
        let file = DataFile {
            path: Path::from("own.parquet"),
            size: 1,
        };
        index.add_written(file, &held.iter().map(String::as_str).collect::<Vec<_>>());
        // 200,000 keys it does not hold: at the files' own 1e-5 about two
        // would hit (a read of the file each); at 1e-7, none is expected.
        let absent: Vec<String> = (0..200_000).map(|i| format!("absent-{i}")).collect();
        let false_hits = hits(&mut index, &store, &absent).await;
        assert!(false_hits < 2, "{false_hits} false hits");
        assert_eq!(hits(&mut index, &store, &held).await, 1_000);
    }

    #[tokio::test]
    async fn a_merge_tables_filters_have_the_lower_rate_written_or_built() {
        use crate::columns::Columns;
        let held: Vec<String> = (0..1_000).map(|i| format!("held-{i}")).collect();
        let schema = Arc::new(Schema::new(vec![Field::new("k", ArrowType::Utf8, false)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(held.clone()))]).unwrap();
        let store = memory();
        let field =
            deltalake::kernel::StructField::new("k", deltalake::kernel::DataType::STRING, false);
        let merged = Columns::growing(vec![field.clone()], 1).keyed_by("k");
        let appended = Columns::growing(vec![field], 1);
        // Files another run wrote, each read back with its own filter; and
        // one another tool wrote without a filter (a compaction), whose
        // filter the index builds at its table's rate.
        let plain = WriterProperties::builder().build();
        let files = [
            (
                "merged",
                &merged,
                writer_properties(merged.key_filter(), None, (1_000, ROW_GROUP)),
            ),
            (
                "appended",
                &appended,
                writer_properties(appended.key_filter(), None, (1_000, ROW_GROUP)),
            ),
            ("compacted", &merged, plain),
        ];
        // A million keys none holds: at 1e-5 about five hit (a read of the
        // file each); at 1e-7, none is expected.
        let absent: Vec<String> = (0..1_000_000).map(|i| format!("absent-{i}")).collect();
        let mut false_hits = Vec::new();
        for (name, columns, properties) in files {
            let file = stored(&store, name, &batch, Some(properties)).await;
            let mut index = unbounded(columns.key_filter());
            index.add(&store, vec![file], "t").await.unwrap();
            false_hits.push(hits(&mut index, &store, &absent).await);
            assert_eq!(hits(&mut index, &store, &held).await, 1_000);
        }
        assert!(
            false_hits[0] < 2,
            "merge table: {} false hits",
            false_hits[0]
        );
        assert!(
            false_hits[1] >= 2,
            "append table: {} false hits, at 1e-5",
            false_hits[1]
        );
        assert!(
            false_hits[2] < 2,
            "merge table, compacted: {} false hits",
            false_hits[2]
        );
    }

    /// `batch` written as the Parquet file `name` in `store`, under
    /// `properties`.
    async fn stored(
        store: &Arc<dyn ObjectStore>,
        name: &str,
        batch: &RecordBatch,
        properties: Option<WriterProperties>,
    ) -> DataFile {
        use deltalake::logstore::object_store::{ObjectStoreExt, PutPayload};
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), properties).unwrap();
        writer.write(batch).unwrap();
        writer.close().unwrap();
        let path = Path::from(name);
        let size = bytes.len() as u64;
        store.put(&path, PutPayload::from(bytes)).await.unwrap();
        DataFile { path, size }
    }

    fn memory() -> Arc<dyn ObjectStore> {
        Arc::new(deltalake::logstore::object_store::memory::InMemory::new())
    }

    #[tokio::test]
    async fn a_file_written_without_filters_gets_one_built_from_each_row_groups_keys() {
        // Another tool's file: no bloom filter, two row groups.
        let n = 3_000;
        let keys: Vec<String> = (0..n).map(|i| format!("key-{i}")).collect();
        let schema = Arc::new(Schema::new(vec![Field::new("k", ArrowType::Utf8, false)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(keys.clone()))]).unwrap();
        let plain = WriterProperties::builder()
            .set_max_row_group_row_count(Some(2_000))
            .build();
        let store = memory();
        let file = stored(&store, "other.parquet", &batch, Some(plain)).await;
        let mut index = unbounded(("k", FPP));
        index.add(&store, vec![file], "t").await.unwrap();
        let filters = &index.files.values().next().unwrap().filters;
        assert!(matches!(filters, Filters::Held { groups, .. } if groups.len() == 2));

        let asked: Vec<String> = ["key-0", "key-2999", "key-3000", "nope"]
            .map(String::from)
            .to_vec();
        let held = index.held(&store, &asked, "t", false).await.unwrap();
        assert_eq!(held, [true, true, false, false]);
        let every = index.held(&store, &keys, "t", false).await.unwrap();
        assert!(every.iter().all(|&h| h), "every stored key is held");
    }

    /// The keys `{name}-0` .. `{name}-{n - 1}`, written as the file `name`
    /// of the column `k` by our writer (its filters at `LOW_FPP`), in row
    /// groups of 1,000.
    async fn our_file(
        store: &Arc<dyn ObjectStore>,
        name: &str,
        n: usize,
    ) -> (DataFile, Vec<String>) {
        let keys: Vec<String> = (0..n).map(|i| format!("{name}-{i}")).collect();
        let schema = Arc::new(Schema::new(vec![Field::new("k", ArrowType::Utf8, false)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(keys.clone()))]).unwrap();
        let properties = writer_properties(("k", LOW_FPP), None, (n, 1_000));
        (stored(store, name, &batch, Some(properties)).await, keys)
    }

    /// How many of an index's files have their filters held, stored, unread.
    fn kinds(index: &KeyIndex) -> [usize; 3] {
        let mut kinds = [0; 3];
        for file in index.files.values() {
            kinds[match file.filters {
                Filters::Held { .. } => 0,
                Filters::Stored(_) => 1,
                Filters::Unread => 2,
            }] += 1;
        }
        kinds
    }

    /// The paths of the files `index` says may hold any of `keys`, sorted.
    async fn may_hold(
        index: &mut KeyIndex,
        store: &Arc<dyn ObjectStore>,
        keys: &[String],
    ) -> Vec<Path> {
        let files = index.may_hold(store, keys, "t").await.unwrap();
        let mut paths: Vec<Path> = files.into_iter().map(|f| f.path).collect();
        paths.sort();
        paths
    }

    #[tokio::test]
    async fn past_its_budget_an_index_reads_the_files_filters_at_each_probe_and_answers_the_same() {
        let store = memory();
        let mut files = Vec::new();
        let mut keys = Vec::new();
        for name in ["a", "b", "c"] {
            let (file, of_file) = our_file(&store, name, 3_000).await;
            files.push(file);
            keys.extend(of_file);
        }
        // What one file's filters take: the budget of the bounded index.
        let one = Arc::new(Budget::new(usize::MAX));
        let mut probe = KeyIndex::within(("k", LOW_FPP), Arc::clone(&one));
        probe.add(&store, files[..1].to_vec(), "t").await.unwrap();
        let budget = Arc::new(Budget::new(one.held()));
        drop(probe);
        assert_eq!(one.held(), 0, "given back when the index is dropped");

        let mut whole = unbounded(("k", LOW_FPP));
        let mut bounded = KeyIndex::within(("k", LOW_FPP), Arc::clone(&budget));
        whole.add(&store, files.clone(), "t").await.unwrap();
        bounded.add(&store, files.clone(), "t").await.unwrap();
        assert_eq!(kinds(&whole), [3, 0, 0]);
        assert_eq!(
            kinds(&bounded),
            [1, 2, 0],
            "one file held, two left in their files"
        );
        assert!(budget.held() > 0 && budget.take(1).is_none());

        let mut asked: Vec<String> = keys.iter().step_by(7).cloned().collect();
        asked.extend((0..3_000).map(|i| format!("absent-{i}")));
        let expected = whole.held(&store, &asked, "t", false).await.unwrap();
        assert_eq!(
            bounded.held(&store, &asked, "t", false).await.unwrap(),
            expected
        );
        assert_eq!(
            expected.iter().filter(|&&h| h).count(),
            keys.len().div_ceil(7)
        );
        for one_file in [&keys[10..11], &keys[3_000..3_001], &keys[8_999..]] {
            assert_eq!(
                may_hold(&mut bounded, &store, one_file).await,
                may_hold(&mut whole, &store, one_file).await,
                "{one_file:?}"
            );
        }

        // A held file gone gives its bytes back; the next file fits.
        let held: Vec<Path> = bounded
            .files
            .iter()
            .filter(|(_, f)| matches!(f.filters, Filters::Held { .. }))
            .map(|(path, _)| path.clone())
            .collect();
        bounded.remove(&held);
        assert_eq!(budget.held(), 0);
        let (d, _) = our_file(&store, "d", 3_000).await;
        bounded.add(&store, vec![d], "t").await.unwrap();
        assert_eq!(kinds(&bounded), [1, 2, 0]);
        drop(bounded);
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn a_file_written_past_the_budget_is_read_from_its_footer_when_first_probed() {
        let store = memory();
        let (file, keys) = our_file(&store, "own", 2_500).await;
        let budget = Arc::new(Budget::new(0));
        let mut index = KeyIndex::within(("k", LOW_FPP), Arc::clone(&budget));
        index.add_written(file, &keys.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(kinds(&index), [0, 0, 1]);

        // Another writer's keys only: this writer's files are not looked in.
        let absent = vec!["absent".to_owned()];
        let held = index.held(&store, &absent, "t", true).await.unwrap();
        assert_eq!(held, [false]);
        assert_eq!(
            kinds(&index),
            [0, 0, 1],
            "not read for a probe that skips it"
        );

        let mut asked = keys.clone();
        asked.push("absent".to_owned());
        let held = index.held(&store, &asked, "t", false).await.unwrap();
        assert!(held[..keys.len()].iter().all(|&h| h), "every key it holds");
        assert!(!held[keys.len()]);
        assert_eq!(kinds(&index), [0, 1, 0], "its filters' places kept");
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn a_filter_built_of_a_file_without_one_is_held_past_the_budget() {
        let keys: Vec<String> = (0..500).map(|i| format!("key-{i}")).collect();
        let schema = Arc::new(Schema::new(vec![Field::new("k", ArrowType::Utf8, false)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(keys.clone()))]).unwrap();
        let store = memory();
        let file = stored(&store, "other.parquet", &batch, None).await;
        let budget = Arc::new(Budget::new(0));
        let mut index = KeyIndex::within(("k", FPP), Arc::clone(&budget));
        index.add(&store, vec![file], "t").await.unwrap();
        assert_eq!(kinds(&index), [1, 0, 0]);
        assert!(budget.held() > 0, "counted, though over");
        let held = index.held(&store, &keys, "t", false).await.unwrap();
        assert!(held.iter().all(|&h| h));
    }

    #[tokio::test]
    async fn a_file_is_read_in_slices_whole_and_in_order_with_or_without_its_offset_index() {
        // Row groups of 40,000 and 3,000 rows (as a compaction writes
        // them, larger than a load's), pages of 5,000: slices of
        // `ROW_GROUP` rows begin and end inside pages and inside groups.
        let n = 43_000;
        let texts: Vec<String> = (0..n).map(|i| format!(r#"{{"n":{i}}}"#)).collect();
        let schema = Arc::new(Schema::new(vec![Field::new("row", ArrowType::Utf8, false)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(texts.clone()))]).unwrap();
        let paged = || {
            WriterProperties::builder()
                .set_max_row_group_row_count(Some(40_000))
                .set_data_page_row_count_limit(5_000)
                .set_write_batch_size(1_000)
        };
        let store = memory();
        for (name, properties) in [
            ("indexed.parquet", paged().build()),
            (
                "unindexed.parquet",
                paged()
                    .set_statistics_enabled(EnabledStatistics::Chunk)
                    .set_offset_index_disabled(true)
                    .build(),
            ),
        ] {
            let file = stored(&store, name, &batch, Some(properties)).await;
            let batches: Vec<RecordBatch> = rows_in_slices(&store, &file, "t")
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            let read: Vec<String> = batches
                .iter()
                .flat_map(|b| {
                    let column = b.column(0).as_string::<i32>();
                    (0..b.num_rows())
                        .map(|i| column.value(i).to_owned())
                        .collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(read, texts, "{name}: every row once, in order");
        }
    }

    #[tokio::test]
    async fn the_text_of_the_newest_row_is_read_alone_across_pages_and_batches() {
        use deltalake::arrow::array::TimestampMicrosecondArray;

        // Pages of 100 rows, read in batches of 1,024: the newest row is
        // far from the first page and the first batch, between nulls and
        // an equal time later on.
        let n = 5_000;
        let times: Vec<Option<i64>> = (0..n)
            .map(|i| match i {
                3_333 | 4_000 => Some(1_000_000),
                i if i % 7 == 0 => None,
                i => Some(i as i64),
            })
            .collect();
        let texts: Vec<String> = (0..n).map(|i| format!(r#"{{"n":{i}}}"#)).collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("row", ArrowType::Utf8, false),
            Field::new(
                "at",
                ArrowType::Timestamp(deltalake::arrow::datatypes::TimeUnit::Microsecond, None),
                true,
            ),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(texts)),
                Arc::new(TimestampMicrosecondArray::from(times)),
            ],
        )
        .unwrap();
        let properties = WriterProperties::builder()
            .set_data_page_row_count_limit(100)
            .set_write_batch_size(100)
            .build();
        let store = memory();
        let file = stored(&store, "f.parquet", &batch, Some(properties)).await;
        let newest = text_of_newest(&store, &file, ("row", "at"), "t")
            .await
            .unwrap();
        assert_eq!(
            newest.as_deref(),
            Some(r#"{"n":3333}"#),
            "the first of equals"
        );
    }

    #[tokio::test]
    async fn a_file_whose_times_are_all_null_has_no_newest_row() {
        let none: Vec<Option<i64>> = vec![None; 3];
        let schema = Arc::new(Schema::new(vec![
            Field::new("row", ArrowType::Utf8, false),
            Field::new("at", ArrowType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a", "b", "c"])),
                Arc::new(deltalake::arrow::array::Int64Array::from(none)),
            ],
        )
        .unwrap();
        let store = memory();
        let file = stored(&store, "none.parquet", &batch, None).await;
        assert_eq!(
            text_of_newest(&store, &file, ("row", "at"), "t")
                .await
                .unwrap(),
            None
        );
    }
}
