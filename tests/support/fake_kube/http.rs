//! The fake API served over HTTP/1.1 on 127.0.0.1: one thread per keep-alive
//! connection, chunked bodies, query strings.

use super::*;

/// The fake served over HTTP/1.1 on 127.0.0.1. Stops accepting when dropped.
pub struct FakeKube {
    pub addr: SocketAddr,
    api: Arc<Mutex<FakeApi>>,
    stop: Arc<AtomicBool>,
}

impl FakeKube {
    /// Binds a free port on 127.0.0.1 and serves in background threads.
    pub fn start() -> FakeKube {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let api = Arc::new(Mutex::new(FakeApi::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_api, thread_stop) = (api.clone(), stop.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                if thread_stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let api = thread_api.clone();
                thread::spawn(move || {
                    let _ = serve_connection(stream, &api);
                });
            }
        });
        FakeKube { addr, api, stop }
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The in-memory server, to inspect or to prepare (e.g. `fail_when`).
    pub fn api(&self) -> MutexGuard<'_, FakeApi> {
        lock(&self.api)
    }

    /// Every stored object, keyed `namespaces/<ns>` or
    /// `namespaces/<ns>/secrets/<name>`.
    pub fn objects(&self) -> BTreeMap<String, Value> {
        self.api().objects()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.api().requests()
    }

    /// The names of the stored namespaces.
    pub fn namespaces(&self) -> Vec<String> {
        self.objects()
            .keys()
            .filter(|key| !key.contains("/secrets/"))
            .filter_map(|key| key.strip_prefix("namespaces/").map(str::to_string))
            .collect()
    }

    /// The stored Secret object, if any.
    pub fn secret(&self, namespace: &str, name: &str) -> Option<Value> {
        self.objects()
            .remove(&format!("namespaces/{namespace}/secrets/{name}"))
    }

    /// The Secret's `data`, base64-decoded.
    pub fn secret_data(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, String>> {
        let secret = self.secret(namespace, name)?;
        let data = secret
            .get("data")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Some(
            data.iter()
                .map(|(k, v)| {
                    let bytes = v.as_str().and_then(decode_base64).unwrap_or_default();
                    (k.clone(), String::from_utf8_lossy(&bytes).into_owned())
                })
                .collect(),
        )
    }

    /// A kubeconfig whose only context (`fake`) points at this server.
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_of(
            "    token: fake-token\n",
            "    namespace: default\n",
            "preferences: {}\n",
        )
    }

    /// A kubeconfig whose user authenticates through an exec credential plugin, as
    /// EKS, GKE and AKS kubeconfigs do: `plugin` must print an `ExecCredential`.
    pub fn exec_kubeconfig(&self, plugin: &Path) -> String {
        let user = format!(
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: {}\n      args: [token, --cluster, fake]\n      interactiveMode: IfAvailable\n",
            plugin.display()
        );
        self.kubeconfig_of(&user, "", "")
    }

    /// A kubeconfig of one cluster, user and context, all `fake`: the user's fields
    /// `user`, the context's extra lines `context`, and `tail` after `current-context`.
    fn kubeconfig_of(&self, user: &str, context: &str, tail: &str) -> String {
        format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: fake\n  cluster:\n    server: {url}\n\
             users:\n\
             - name: fake\n  user:\n{user}\
             contexts:\n\
             - name: fake\n  context:\n    cluster: fake\n    user: fake\n{context}\
             current-context: fake\n{tail}",
            url = self.url()
        )
    }

    pub fn write_kubeconfig(&self, path: &Path) -> io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, self.kubeconfig())
    }
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn lock(api: &Mutex<FakeApi>) -> MutexGuard<'_, FakeApi> {
    api.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Serves requests on one keep-alive connection until the client closes it.
fn serve_connection(stream: TcpStream, api: &Mutex<FakeApi>) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let Some(request_line) = read_line(&mut reader)? else {
            return Ok(());
        };
        if request_line.is_empty() {
            continue;
        }
        let mut words = request_line.split(' ');
        let method = words.next().unwrap_or_default().to_string();
        let target = words.next().unwrap_or_default().to_string();

        let mut headers = BTreeMap::new();
        loop {
            let Some(line) = read_line(&mut reader)? else {
                return Ok(());
            };
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }

        let body = if headers
            .get("transfer-encoding")
            .is_some_and(|v| v.contains("chunked"))
        {
            read_chunked(&mut reader)?
        } else {
            let length = headers
                .get("content-length")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            let mut body = vec![0; length];
            reader.read_exact(&mut body)?;
            body
        };

        let request = Request::new(
            &method,
            &target,
            headers.get("content-type").map(String::as_str),
            &String::from_utf8_lossy(&body),
        );
        let response = {
            let mut api = lock(api);
            let wanted = api.token.clone().map(|t| format!("Bearer {t}"));
            if wanted.is_some() && headers.get("authorization") != wanted.as_ref() {
                status(401, "Unauthorized", "Unauthorized", None)
            } else {
                api.handle(request)
            }
        };
        let body = response.body.to_string();
        write!(
            writer,
            "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{}",
            response.status,
            reason_phrase(response.status),
            body.len(),
            body
        )?;
        writer.flush()?;
        if headers
            .get("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
        {
            return Ok(());
        }
    }
}

/// One line without its line ending; `None` at the end of the stream.
fn read_line(reader: &mut impl BufRead) -> io::Result<Option<String>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    line.truncate(line.trim_end().len());
    Ok(Some(line))
}

fn read_chunked(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size_line = String::new();
        reader.read_line(&mut size_line)?;
        let size_text = size_line.trim().split(';').next().unwrap_or_default();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
        if size == 0 {
            // Trailers, then the final empty line.
            while read_line(reader)?.is_some_and(|line| !line.is_empty()) {}
            return Ok(body);
        }
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk)?;
        chunk.truncate(size);
        body.extend(chunk);
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        405 => "Method Not Allowed",
        415 => "Unsupported Media Type",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

pub(super) fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
