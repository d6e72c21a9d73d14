// A classic (non-module) script loaded before app.js: it catches every JS error, including a module
// that fails to load, onto window.__uiErrors and shows them in #error-banner.
(function () {
  'use strict';
  var errors = window.__uiErrors || [];
  window.__uiErrors = errors;

  function show() {
    var banner = document.getElementById('error-banner');
    var list = document.getElementById('error-list');
    if (!banner || !list) return;
    list.textContent = '';
    var shown = errors.slice(-5);
    for (var i = 0; i < shown.length; i += 1) {
      var li = document.createElement('li');
      li.textContent = shown[i];
      list.appendChild(li);
    }
    if (errors.length > shown.length) {
      var more = document.createElement('li');
      more.textContent = '(' + (errors.length - shown.length) + ' earlier error(s) in window.__uiErrors)';
      list.appendChild(more);
    }
    banner.hidden = errors.length === 0;
  }

  /** Record one error (a message string) and show it. */
  window.__uiReport = function (message) {
    errors.push(String(message));
    if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', show);
    else show();
  };

  window.addEventListener('error', function (ev) {
    var where = ev.filename ? ' (' + ev.filename.replace(/^.*\//, '') + ':' + ev.lineno + ')' : '';
    window.__uiReport((ev.message || 'error') + where);
  });
  window.addEventListener('unhandledrejection', function (ev) {
    var r = ev.reason;
    window.__uiReport('unhandled: ' + (r && r.message ? r.message : String(r)));
  });
  document.addEventListener('DOMContentLoaded', function () {
    var dismiss = document.getElementById('error-dismiss');
    if (dismiss) {
      dismiss.addEventListener('click', function () {
        document.getElementById('error-banner').hidden = true;
      });
    }
    if (errors.length) show();
  });
}());
